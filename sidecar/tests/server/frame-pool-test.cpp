// frame_pool: big payload buffers are reused (smallest that fits), small ones and those past the budget freed.
#include "server/frame-pool.h"

#include <gtest/gtest.h>

namespace {

constexpr size_t MB = 1u << 20;

TEST(frame_pool, reuses_the_smallest_kept_buffer_that_fits) {
    rfdetr::frame_pool pool(1 * MB, 64 * MB);
    auto               a  = pool.take(4 * MB);
    auto               b  = pool.take(2 * MB);
    const uint8_t *    pa = a.data.get();
    const uint8_t *    pb = b.data.get();
    pool.give(std::move(a));
    pool.give(std::move(b));
    EXPECT_EQ(pool.kept_bytes(), 6 * MB);
    auto c = pool.take(3 * MB / 2);
    EXPECT_EQ(c.data.get(), pb) << "the 2 MB buffer fits 1.5 MB best";
    EXPECT_EQ(c.size, 3 * MB / 2);
    EXPECT_EQ(c.capacity, 2 * MB);
    auto d = pool.take(3 * MB);
    EXPECT_EQ(d.data.get(), pa);
    auto e = pool.take(8 * MB);
    EXPECT_NE(e.data.get(), nullptr);
    EXPECT_EQ(e.capacity, 8 * MB) << "nothing kept fits: a new buffer";
    EXPECT_EQ(pool.kept_bytes(), 0u);
}

TEST(frame_pool, small_buffers_and_the_budget_are_respected) {
    rfdetr::frame_pool pool(1 * MB, 5 * MB);
    pool.give(pool.take(1000));
    EXPECT_EQ(pool.kept_bytes(), 0u) << "below min_bytes: freed";
    pool.give(pool.take(6 * MB));
    EXPECT_EQ(pool.kept_bytes(), 0u) << "larger than the whole budget: freed";
    auto x = pool.take(3 * MB), y = pool.take(2 * MB), z = pool.take(3 * MB);
    pool.give(std::move(x));
    pool.give(std::move(y));
    pool.give(std::move(z));
    EXPECT_LE(pool.kept_bytes(), 5 * MB);
    EXPECT_EQ(pool.kept_bytes(), 5 * MB) << "the largest go first: 3 + 2 kept";
}

}  // namespace
