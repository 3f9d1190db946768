// shm_slots::resolve refuses references whose sides no image has, before the length check: with sides up to
// 8192, width*height*3 cannot wrap. Regression for the shm-fuzz findings (sidecar/fuzz/corpus/shm-fuzz/finding-*).
#include "server/shm.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <memory>
#include <string>
#include <unistd.h>

namespace {

struct ShmResolve : ::testing::Test {
    void SetUp() override {
        dir = std::string(getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp") + "/shm-resolve-XXXXXX";
        ASSERT_NE(mkdtemp(dir.data()), nullptr);
        std::string err;
        slots = rfdetr::shm_slots::create(dir, 1, err);
        ASSERT_TRUE(slots) << err;
        name = slots->paths()[0].substr(slots->paths()[0].rfind('/') + 1);
    }
    void TearDown() override {
        slots.reset();
        rmdir(dir.c_str());
    }
    std::string resolve(uint64_t offset, uint64_t length, uint64_t w, uint64_t h) {
        data = nullptr;
        keep.reset();
        return slots->resolve(name, offset, length, w, h, data, keep);
    }
    std::string                        dir, name;
    std::unique_ptr<rfdetr::shm_slots> slots;
    const uint8_t *                    data = nullptr;
    std::shared_ptr<const void>        keep;
};

TEST_F(ShmResolve, WrappedProductIsRefused) {
    // 2^32 * (3 * 2^58) * 3 wraps to 0 in 64 bits: the fuzzer's input (finding-shm-wrapped-length).
    const std::string why = resolve(131584, 0, uint64_t(1) << 32, uint64_t(3) << 58);
    EXPECT_NE(why.find("expected width and height from 1 to 8192"), std::string::npos) << why;
    EXPECT_EQ(data, nullptr);
    EXPECT_FALSE(keep);
}

TEST_F(ShmResolve, ZeroSidedImageIsRefused) {
    const std::string why = resolve(0, 0, 0, 0);  // finding-shm-zero-size
    EXPECT_NE(why.find("describes a 0x0 image"), std::string::npos) << why;
    EXPECT_EQ(data, nullptr);
}

TEST_F(ShmResolve, LargestImageIsAccepted) {
    EXPECT_EQ(resolve(0, 8192ull * 8192 * 3, 8192, 8192), "");
    EXPECT_NE(data, nullptr);
    EXPECT_TRUE(keep);
}

}  // namespace
