// The C++ preprocess: bit-exact (max-abs 0) with the fixtures' pixel_values, and every SIMD level this CPU
// runs equal to the plain reference on sizes chosen to break lane padding, bands and edge taps.
#include "golden-file.h"
#include "preprocess/preprocess.h"
#include "skip.h"

#include <gtest/gtest.h>
#ifdef __linux__
#include <sched.h>
#endif
#include <png.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <stdexcept>
#include <string>
#include <sys/stat.h>
#include <vector>

namespace {

using rfdetr::preprocess_reference;
using rfdetr::preprocessor;
using rfdetr::simd_level;

struct rgb_image {
    int                  width  = 0;
    int                  height = 0;
    std::vector<uint8_t> rgb;
};

bool file_exists(const std::string & p) {
    struct stat st{};
    return stat(p.c_str(), &st) == 0;
}

rgb_image read_png(const std::string & path) {
    png_image img;
    std::memset(&img, 0, sizeof(img));
    img.version = PNG_IMAGE_VERSION;
    if (!png_image_begin_read_from_file(&img, path.c_str())) {
        throw std::runtime_error("read_png: " + path + ": " + img.message);
    }
    img.format = PNG_FORMAT_RGB;
    rgb_image out;
    out.width  = static_cast<int>(img.width);
    out.height = static_cast<int>(img.height);
    out.rgb.resize(PNG_IMAGE_SIZE(img));
    if (!png_image_finish_read(&img, nullptr, out.rgb.data(), 0, nullptr)) {
        throw std::runtime_error("read_png: " + path + ": " + img.message);
    }
    return out;
}

// Bitwise comparison; on a difference, the first index, both values and the max-abs over all.
::testing::AssertionResult same_bits(const std::vector<float> & got, const std::vector<float> & want) {
    if (got.size() != want.size()) {
        return ::testing::AssertionFailure() << "size " << got.size() << " vs " << want.size();
    }
    if (std::memcmp(got.data(), want.data(), got.size() * sizeof(float)) == 0) {
        return ::testing::AssertionSuccess();
    }
    size_t first = 0, diffs = 0;
    double max_abs = 0.0;
    for (size_t i = got.size(); i-- > 0;) {
        uint32_t a, b;
        std::memcpy(&a, &got[i], 4);
        std::memcpy(&b, &want[i], 4);
        if (a != b) {
            first = i;
            diffs++;
            max_abs = std::max(max_abs, std::fabs(static_cast<double>(got[i]) - want[i]));
        }
    }
    return ::testing::AssertionFailure() << diffs << " values differ (max-abs " << max_abs << "); first at " << first
                                         << ": " << got[first] << " vs " << want[first];
}

std::vector<simd_level> runnable_levels() {
    std::vector<simd_level> out;
    for (simd_level l : {simd_level::SIMD_SCALAR, simd_level::SIMD_AVX2, simd_level::SIMD_AVX512}) {
        if (rfdetr::simd_level_supported(l)) {
            out.push_back(l);
        }
    }
    return out;
}

// Runs the reference and every level on one image; each must give `want` (or the reference's bits).
void check_all_levels(const rgb_image & img, int s, const std::vector<float> * want, const std::string & what) {
    std::vector<float> ref(3u * s * s);
    preprocess_reference(img.rgb.data(), img.width, img.height, s, ref.data());
    if (want) {
        EXPECT_TRUE(same_bits(ref, *want)) << what << ": reference vs fixture";
    }
    for (simd_level l : runnable_levels()) {
        preprocessor       p(s, l);
        std::vector<float> got(3u * s * s, -7.0f);
        p.run(img.rgb.data(), img.width, img.height, got.data());
        EXPECT_TRUE(same_bits(got, want ? *want : ref)) << what << ": " << rfdetr::simd_level_name(l);
    }
}

TEST(fixtures, pixel_values_bit_exact_for_every_synth_case) {
    for (int n = 1; n <= 3; n++) {
        const std::string dir = rfdetr::test::repo_fixtures_dir() + "/case-" + std::to_string(n);
        const auto        img = read_png(dir + "/input.png");
        const auto        g   = rfdetr::test::read_golden(dir + "/golden.safetensors");
        const auto &      pv  = g.at("pixel_values");
        ASSERT_EQ(pv.shape, (std::vector<int64_t>{1, 3, 560, 560}));
        check_all_levels(img, 560, &pv.f32, "case-" + std::to_string(n));
    }
}

TEST(fixtures, pixel_values_bit_exact_for_every_family_size) {
    const std::string synth = rfdetr::test::shared_fixtures_dir();
    const std::string family = synth.empty() ? "" : synth + "/../rfdetr-family";
    if (family.empty() || !file_exists(family)) {
        RFDETR_SKIP_OR_FAIL("../shared/fixtures/rfdetr-family is absent (set RFDETR_SHARED_FIXTURES)");
    }
    int checked = 0;
    for (const char * variant : {"nano", "small", "medium", "large", "large_deprecated"}) {
        const std::string dir = family + "/" + variant + "/case-1";
        if (!file_exists(dir + "/input.png")) {
            ADD_FAILURE() << dir << "/input.png is missing";
            continue;
        }
        const auto   img = read_png(dir + "/input.png");
        const auto   g   = rfdetr::test::read_golden(dir + "/golden.safetensors");
        const auto & pv  = g.at("pixel_values");
        ASSERT_EQ(pv.shape.size(), 4u);
        check_all_levels(img, static_cast<int>(pv.shape[3]), &pv.f32, variant);
        checked++;
    }
    EXPECT_EQ(checked, 5);
}

rgb_image noise(int width, int height, uint32_t seed) {
    rgb_image img;
    img.width  = width;
    img.height = height;
    img.rgb.resize(static_cast<size_t>(width) * height * 3);
    uint32_t x = seed * 2654435761u + 1;
    for (auto & b : img.rgb) {
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        b = static_cast<uint8_t>(x >> 11);
    }
    return img;
}

// One test per level, so a level this CPU lacks shows as a skip (a failure under RFDETR_REQUIRE_ALL=1).
class level_test : public ::testing::TestWithParam<simd_level> {};

TEST_P(level_test, equals_the_reference_on_odd_sizes_in_both_width_forms) {
    const simd_level l = GetParam();
    if (!rfdetr::simd_level_supported(l)) {
        RFDETR_SKIP_OR_FAIL(std::string("this CPU cannot run the ") + rfdetr::simd_level_name(l) +
                            " kernels; run on one that can to test them");
    }
    struct shape {
        int w, h, s;
    };
    const shape shapes[] = {
        {1, 1, 560},     {1, 8192, 560},  {8192, 1, 560},  {2, 3, 17},     {7, 13, 31},   {13, 7, 31},
        {997, 3, 560},   {3, 997, 560},   {641, 479, 560}, {479, 641, 384}, {101, 103, 1}, {560, 560, 560},
        {4001, 2999, 560}, {1021, 1019, 704}, {577, 83, 576}, {89, 509, 512}, {1054, 33, 560}, {1055, 35, 560},
        {640, 480, 560}, {4000, 3000, 560},
    };
    // The narrow (permute) form covers scales up to ~1.8 (1054 -> 560 is narrow, 1055 -> 560 is not): both
    // forms must be among the shapes, or a level's narrow kernel could go untested.
    int      narrow = 0, wide = 0;
    uint32_t seed   = 1;
    for (const auto & sh : shapes) {
        (rfdetr::width_plan_make(rfdetr::axis_weights_compute(sh.w, sh.s)).narrow ? narrow : wide)++;
        const rgb_image    img = noise(sh.w, sh.h, seed++);
        std::vector<float> ref(3u * sh.s * sh.s), got(3u * sh.s * sh.s, -7.0f);
        preprocess_reference(img.rgb.data(), img.width, img.height, sh.s, ref.data());
        preprocessor p(sh.s, l, /*use_helper=*/false);
        p.run(img.rgb.data(), img.width, img.height, got.data());
        EXPECT_TRUE(same_bits(got, ref)) << sh.w << "x" << sh.h << "->" << sh.s << ": " << rfdetr::simd_level_name(l);
    }
    EXPECT_GE(narrow, 5);
    EXPECT_GE(wide, 5);
    EXPECT_TRUE(rfdetr::width_plan_make(rfdetr::axis_weights_compute(1054, 560)).narrow);
    EXPECT_FALSE(rfdetr::width_plan_make(rfdetr::axis_weights_compute(1055, 560)).narrow);
}

INSTANTIATE_TEST_SUITE_P(levels, level_test,
                         ::testing::Values(simd_level::SIMD_SCALAR, simd_level::SIMD_AVX2, simd_level::SIMD_AVX512),
                         [](const ::testing::TestParamInfo<simd_level> & i) { return rfdetr::simd_level_name(i.param); });

TEST(levels, avx512_normalise_equals_the_divide) {
    // The AVX-512 height pass rounds centred/std by a reciprocal and one fma step instead of a divide; this
    // checks it for every float a width/height chain can end on (0 .. 256: the weights sum to 1) against the
    // scalar kernel's plain divide, per channel.
    if (!rfdetr::simd_level_supported(simd_level::SIMD_AVX512)) {
        RFDETR_SKIP_OR_FAIL("this CPU cannot run the avx512 kernels; run on one that can to test them");
    }
    const auto &       scalar = rfdetr::kernels_for(simd_level::SIMD_SCALAR);
    const auto &       avx512 = rfdetr::kernels_for(simd_level::SIMD_AVX512);
    constexpr int      chunk  = 1 << 20;
    const uint32_t     last   = 0x43800000u;  // 256.0f
    const float        one    = 1.0f;
    std::vector<float> acc(chunk), want(chunk), got(chunk);
    size_t bad[3] = {0, 0, 0};
    for (uint64_t b0 = 0; b0 <= last; b0 += chunk) {
        for (int i = 0; i < chunk; i++) {
            const uint32_t bits = static_cast<uint32_t>(std::min<uint64_t>(b0 + i, last));
            std::memcpy(&acc[i], &bits, 4);
        }
        for (int c = 0; c < 3; c++) {
            const float mean = rfdetr::k_imagenet_mean[c], std = rfdetr::k_imagenet_std[c];
            scalar.height_row(acc.data(), 0, 1, &one, chunk, mean, std, want.data());
            avx512.height_row(acc.data(), 0, 1, &one, chunk, mean, std, got.data());
            if (std::memcmp(want.data(), got.data(), chunk * sizeof(float)) == 0) {
                continue;
            }
            for (int i = 0; i < chunk; i++) {
                if (std::memcmp(&want[i], &got[i], 4) != 0 && bad[c]++ == 0) {
                    ADD_FAILURE() << "channel " << c << ": acc " << acc[i] << " gives " << got[i] << ", the divide "
                                  << want[i];
                }
            }
        }
    }
    for (int c = 0; c < 3; c++) {
        EXPECT_EQ(bad[c], 0u) << "channel " << c;
    }
}

TEST(levels, extreme_pixel_values_saturated_and_black) {
    for (uint8_t v : {uint8_t{0}, uint8_t{255}}) {
        rgb_image img = noise(333, 517, 9);
        std::fill(img.rgb.begin(), img.rgb.end(), v);
        check_all_levels(img, 560, nullptr, "constant " + std::to_string(v));
    }
}

TEST(preprocessor, reuse_across_sizes_gives_the_same_bits) {
    // The caches and the band buffer are reused; interleaving sizes must not leak state between calls.
    preprocessor       p(560);
    const rgb_image    a = noise(640, 480, 3), b = noise(4000, 30, 4);
    std::vector<float> first(3 * 560 * 560), again(3 * 560 * 560), other(3 * 560 * 560);
    p.run(a.rgb.data(), a.width, a.height, first.data());
    p.run(b.rgb.data(), b.width, b.height, other.data());
    for (int i = 0; i < 10; i++) {
        const rgb_image c = noise(10 + i * 37, 20 + i * 11, 5 + i);
        p.run(c.rgb.data(), c.width, c.height, other.data());
    }
    p.run(a.rgb.data(), a.width, a.height, again.data());
    EXPECT_TRUE(same_bits(again, first));
}

TEST(preprocessor, bands_split_with_the_helper_thread_give_the_same_bits) {
    // Past k_split_pixels the helper thread computes half of the bands; odd sizes move the split point.
    for (simd_level l : runnable_levels()) {
        for (const auto & wh : {std::make_pair(1500, 701), std::make_pair(1024, 1024), std::make_pair(333, 3201),
                                std::make_pair(640, 480)}) {
            ASSERT_GE(static_cast<size_t>(wh.first) * wh.second, preprocessor::k_split_pixels);
            const rgb_image    img = noise(wh.first, wh.second, 9);
            preprocessor       split(560, l), alone(560, l, /*use_helper=*/false);
            std::vector<float> a(3 * 560 * 560), b(3 * 560 * 560), ref(3 * 560 * 560);
            split.run(img.rgb.data(), img.width, img.height, a.data());
            split.run(img.rgb.data(), img.width, img.height, a.data());  // the helper, once started, again
            alone.run(img.rgb.data(), img.width, img.height, b.data());
            preprocess_reference(img.rgb.data(), img.width, img.height, 560, ref.data());
            EXPECT_TRUE(same_bits(a, b)) << wh.first << "x" << wh.second << " level " << static_cast<int>(l);
            EXPECT_TRUE(same_bits(a, ref)) << wh.first << "x" << wh.second << " level " << static_cast<int>(l);
        }
    }
}

TEST(preprocessor, the_helper_is_kept_off_the_callers_cpu) {
    // A helper woken onto the caller's CPU preempts it and the split buys nothing (RESULTS.md section 11), so
    // each split leaves the helper every CPU the caller may use but the caller's own; the bits stay the same.
#ifndef __linux__
    GTEST_SKIP() << "thread affinity is only set on Linux";
#else
    cpu_set_t mine;
    CPU_ZERO(&mine);
    ASSERT_EQ(sched_getaffinity(0, sizeof mine, &mine), 0);
    if (CPU_COUNT(&mine) < 2) {
        GTEST_SKIP() << "this thread may use " << CPU_COUNT(&mine) << " CPU; keeping the helper off it needs 2";
    }
    const rgb_image    img = noise(640, 480, 12);
    preprocessor       split(560), alone(560, rfdetr::simd_level_best(), /*use_helper=*/false);
    std::vector<float> a(3 * 560 * 560), b(3 * 560 * 560);
    EXPECT_TRUE(split.helper_cpus().empty()) << "the helper starts on first use";
    split.run(img.rgb.data(), img.width, img.height, a.data());
    alone.run(img.rgb.data(), img.width, img.height, b.data());
    EXPECT_TRUE(same_bits(a, b));
    const std::vector<int> helper = split.helper_cpus();
    EXPECT_EQ(static_cast<int>(helper.size()), CPU_COUNT(&mine) - 1) << "the helper may use all but one CPU";
    for (int c : helper) {
        EXPECT_TRUE(CPU_ISSET(c, &mine)) << "the helper may use CPU " << c << ", which the caller may not";
    }
#endif
}

TEST(preprocessor, refuses_bad_sizes_by_name) {
    preprocessor       p(560);
    std::vector<float> out(3 * 560 * 560);
    uint8_t            px[3] = {1, 2, 3};
    try {
        p.run(px, 0, 1, out.data());
        FAIL() << "a 0-wide image was accepted";
    } catch (const std::invalid_argument & e) {
        EXPECT_NE(std::string(e.what()).find("0x1"), std::string::npos) << e.what();
    }
    EXPECT_THROW(preprocessor(0), std::invalid_argument);
    EXPECT_THROW(rfdetr::axis_weights_compute(5, 0), std::invalid_argument);
}

}  // namespace
