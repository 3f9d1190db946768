// Where the model runs its attention in bf16 (attention-bf16.h): at bf16 and int8 when the bf16 GEMM's kernel is
// AMX, or AVX512-BF16 on an AMD CPU (where vdpbf16ps outruns the half-rate 512-bit FMAs); never at fp32, and not
// on Intel under RFDETR_CPU_ISA=avx512 (there the AVX512-BF16 attention is no faster than fp32); and a bf16
// forward is the same bit for bit at 1 and 2 threads (each thread's attention scratch is its own). Needs the
// seed-1 checkpoint (ctest fixture synth_seed1) and the case-1 input; a CPU where a case's kernel is absent is a
// skip (a failure under RFDETR_REQUIRE_ALL=1).
#include "engines/cpu/attention-bf16.h"
#include "engines/cpu/bgemm.h"
#include "engines/cpu/cpu-model.h"
#include "engines/cpu/gemm.h"
#include "engines/cpu/isa-level.h"
#include "engines/cpu/qgemm.h"
#include "golden-file.h"
#include "model/checkpoint.h"
#include "skip.h"

#include <gtest/gtest.h>

#include <cstring>
#include <memory>
#include <string>
#include <vector>

namespace {

namespace cpu = rfdetr::cpu;

// The kernels selected now, selected again on destruction.
struct kernels_scope {
    std::string f32 = cpu::gemm_isa(), i8 = cpu::qgemm_isa(), b16 = cpu::bgemm_isa();
    ~kernels_scope() {
        cpu::gemm_select_isa(f32.c_str());
        cpu::qgemm_select_isa(i8.c_str());
        cpu::bgemm_select_isa(b16.c_str());
    }
};

class attention_bf16_model : public ::testing::Test {
  protected:
    void SetUp() override {
        try {
            ckpt_ = rfdetr::checkpoint::open(rfdetr::test::test_weights_dir());
        } catch (const std::exception & e) {
            FAIL() << "the seed-1 checkpoint did not load (" << e.what()
                   << "); ctest generates it with the synth_seed1 fixture, or set RFDETR_TEST_WEIGHTS";
        }
    }
    std::unique_ptr<rfdetr::checkpoint> ckpt_;
};

bool amd() {
    __builtin_cpu_init();
    return __builtin_cpu_is("amd");
}

TEST_F(attention_bf16_model, runs_at_bf16_and_int8_on_amx_only) {
    if (std::strcmp(cpu::bgemm_best_isa(), "amx") != 0) {
        RFDETR_SKIP_OR_FAIL("this CPU has no AMX-BF16 (or the OS refused the tile state); see /proc/cpuinfo's amx_bf16 flag");
    }
    kernels_scope keep;
    EXPECT_TRUE(cpu::model(*ckpt_, 1, cpu::precision::bf16).bf16_attention());
    EXPECT_TRUE(cpu::model(*ckpt_, 1, cpu::precision::int8).bf16_attention());
    EXPECT_FALSE(cpu::model(*ckpt_, 1, cpu::precision::fp32).bf16_attention());
    ASSERT_EQ(cpu::select_isa_level("avx512"), "");
    ASSERT_STREQ(cpu::bgemm_isa(), "avx512bf16");
    EXPECT_FALSE(cpu::model(*ckpt_, 1, cpu::precision::bf16).bf16_attention()) << "RFDETR_CPU_ISA=avx512";
    EXPECT_FALSE(cpu::model(*ckpt_, 1, cpu::precision::int8).bf16_attention()) << "RFDETR_CPU_ISA=avx512";
}

TEST_F(attention_bf16_model, runs_at_bf16_and_int8_with_avx512bf16_on_amd) {
    if (std::strcmp(cpu::bgemm_best_isa(), "avx512bf16") != 0 || !amd()) {
        RFDETR_SKIP_OR_FAIL("needs an AMD CPU with AVX512-BF16 and no AMX (Zen 4 or later); this one's bf16 GEMM kernel is '" +
                            std::string(cpu::bgemm_best_isa()) + "'" + (amd() ? "" : " and it is not AMD"));
    }
    kernels_scope keep;
    EXPECT_TRUE(cpu::model(*ckpt_, 1, cpu::precision::bf16).bf16_attention());
    EXPECT_STREQ(cpu::attention_bf16_isa(), "avx512bf16");
    // int8: the decoder's heads in bf16, the ViT's in int8 (its int8 GEMM runs on AVX-512 VNNI here).
    const cpu::model int8(*ckpt_, 1, cpu::precision::int8);
    EXPECT_TRUE(int8.bf16_attention());
    EXPECT_TRUE(int8.int8_attention());
    EXPECT_FALSE(cpu::model(*ckpt_, 1, cpu::precision::fp32).bf16_attention());
}

TEST_F(attention_bf16_model, bf16_forward_is_the_same_at_1_and_2_threads) {
    if (!cpu::model(*ckpt_, 1, cpu::precision::bf16).bf16_attention()) {
        RFDETR_SKIP_OR_FAIL("the model keeps the fp32 attention on this CPU (no AMX-BF16, and no AVX512-BF16 on an AMD core)");
    }
    const auto golden = rfdetr::test::read_golden(rfdetr::test::repo_fixtures_dir() + "/case-1/golden.safetensors");
    const float * px  = golden.at("pixel_values").f32.data();
    std::vector<float> out[2][2];
    for (int t = 1; t <= 2; ++t) {
        cpu::model m(*ckpt_, t, cpu::precision::bf16);
        ASSERT_TRUE(m.bf16_attention());
        auto & o = out[t - 1];
        o[0].resize(static_cast<size_t>(m.dims().queries) * m.num_classes());
        o[1].resize(static_cast<size_t>(m.dims().queries) * 4);
        m.forward(px, o[0].data(), o[1].data());
    }
    ASSERT_EQ(out[0][0].size(), out[1][0].size());
    EXPECT_EQ(std::memcmp(out[0][0].data(), out[1][0].data(), out[0][0].size() * 4), 0) << "logits differ";
    EXPECT_EQ(std::memcmp(out[0][1].data(), out[1][1].data(), out[0][1].size() * 4), 0) << "boxes differ";
}

}  // namespace
