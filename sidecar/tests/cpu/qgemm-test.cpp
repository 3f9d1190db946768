// The int8 GEMM (qgemm.h): the weight quantisation, each kernel (AVX2, AVX-VNNI, AVX-512 VNNI, AMX) against
// the plain-loop form of the same numerics on odd sizes with every epilogue and the LayerNorm prologue
// (bit-exact but for GELU's vectorised erf), each kernel's int32 sums against exact integer products, and the
// int8 result against the float product within the rounding bound of the two quantisations. A kernel this CPU lacks is a skip (a failure under
// RFDETR_REQUIRE_ALL=1). Outputs sit between guard floats so a store past a tile's edge fails.
#include "engines/cpu/gemm.h"
#include "engines/cpu/kernels.h"
#include "engines/cpu/qgemm.h"
#include "golden-file.h"

#include "gemm-case.h"
#include "random-vec.h"
#include "skip.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

namespace {

using rfdetr::test::gemm_case;
using rfdetr::test::k_guard;
using rfdetr::test::k_pad;
using rfdetr::test::random_vec;
namespace cpu = rfdetr::cpu;

struct qisa_scope {
    explicit qisa_scope(const char * isa) : before(cpu::qgemm_isa()), ok(cpu::qgemm_select_isa(isa)) {}
    ~qisa_scope() { cpu::qgemm_select_isa(before.c_str()); }
    std::string before;
    bool        ok;
};

#define REQUIRE_ISA(scope, isa)                                                                              \
    if (!(scope).ok) {                                                                                       \
        RFDETR_SKIP_OR_FAIL(std::string("this CPU lacks the instructions of the ") + isa +                   \
                            " int8 kernel (see /proc/cpuinfo's flags); it runs on a CPU that has them");      \
    }

void check(int m, int n, int k, cpu::epi kind, bool with_ln) {
    SCOPED_TRACE(std::string(cpu::qgemm_isa()) + " m=" + std::to_string(m) + " n=" + std::to_string(n) + " k=" +
                 std::to_string(k) + " epi=" + std::to_string(static_cast<int>(kind)) + (with_ln ? " +LN" : ""));
    gemm_case    t(m, n, k, kind, 30);
    const int    lda = t.lda, ldc = t.ldc;
    const auto & a  = t.a;
    const auto & w  = t.w;
    const auto & g  = t.g;
    const auto & b  = t.b;
    const auto & e  = t.e;
    const auto & ln = t.ln;
    auto &       c  = t.c;

    // The reference reads the LayerNormed rows (the LayerNorm has its own tests).
    std::vector<float> an(a);
    if (with_ln) {
        for (int i = 0; i < m; ++i) cpu::layernorm_row(a.data() + static_cast<size_t>(i) * lda, an.data() + static_cast<size_t>(i) * lda, k, g.data(), b.data(), ln.eps);
    }
    const cpu::qweight qw   = cpu::quantize_weight(w.data(), n, k, k);
    std::vector<float> want = c;
    cpu::qgemm_ref(m, an.data(), lda, qw, want.data() + k_pad, ldc, e);

    std::vector<float> scratch(cpu::gemm_scratch_floats(k));
    cpu::qgemm_packed(m, a.data(), lda, qw, c.data() + k_pad, ldc, e, scratch.data(), with_ln ? &ln : nullptr);
    for (size_t i = 0; i < c.size(); ++i) {
        if (want[i] == k_guard) {
            ASSERT_EQ(c[i], k_guard) << "store outside the output (or into its row padding) at float " << i;
            continue;
        }
        if (kind == cpu::epi::bias_gelu || kind == cpu::epi::bias_gelu_add) {  // vectorised erf vs libm
            ASSERT_NEAR(c[i], want[i], 2e-6 * (1.0 + std::fabs(want[i]))) << "at float " << i;
        } else {
            ASSERT_EQ(c[i], want[i]) << "at float " << i;  // the same integers, the same float operations
        }
    }
}

void check_all_sizes() {
    // m around the tile heights (4, 6, 14, AMX's 16 and 32) and the row block; n around the 32-column panels
    // and AMX's 16-column tiles; k not a multiple of 4 (the padded k group) nor of 64 (AMX's k step), and long
    // enough for several row blocks.
    for (int m : {1, 3, 4, 5, 6, 7, 13, 14, 15, 16, 17, 29, 31, 32, 33, 300}) {
        for (int n : {1, 7, 8, 9, 16, 17, 31, 32, 33, 91}) check(m, n, 37, cpu::epi::store, false);
    }
    for (int k : {63, 64, 65, 129}) check(35, 40, k, cpu::epi::bias, false);
    check(70, 40, 4000, cpu::epi::bias_scale_add, false);  // several AMX row blocks (32 rows each at k = 4000)
    rfdetr::test::for_each_epilogue_case(check);
    check(2, 3, 1, cpu::epi::store, false);
}

TEST(cpu_qgemm, avx2_kernel_matches_reference_on_odd_sizes) {
    qisa_scope s("avx2");
    REQUIRE_ISA(s, "avx2");
    check_all_sizes();
}

TEST(cpu_qgemm, avxvnni_kernel_matches_reference_on_odd_sizes) {
    qisa_scope s("avxvnni");
    REQUIRE_ISA(s, "AVX-VNNI");
    check_all_sizes();
}

TEST(cpu_qgemm, avx512vnni_kernel_matches_reference_on_odd_sizes) {
    qisa_scope s("avx512vnni");
    REQUIRE_ISA(s, "AVX-512 VNNI");
    check_all_sizes();
}

TEST(cpu_qgemm, amx_kernel_matches_reference_on_odd_sizes) {
    qisa_scope s("amx");
    REQUIRE_ISA(s, "AMX-INT8");
    check_all_sizes();
}

// The int32 sums themselves: integer activations with a +-127 in every row and integer weights with a +-127 in
// every channel quantise to themselves with scales of exactly 1, so each output is float(sum_k a w), exact
// below 2^24 (here at most 127 * 127 * 1000), and must equal the integer product computed here in int64. Row 0
// and channel 0 at the extremes are the pairs that would saturate vpmaddubsw's int16 fed the u8 rows directly.
class cpu_qgemm_sums : public ::testing::TestWithParam<const char *> {};

TEST_P(cpu_qgemm_sums, equal_the_exact_integer_products) {
    qisa_scope s(GetParam());
    REQUIRE_ISA(s, GetParam());
    std::mt19937 rng(7);
    auto         ints = [&](size_t count, int lim) {
        std::uniform_int_distribution<int> u(-lim, lim);
        std::vector<float>                 v(count);
        for (auto & x : v) x = static_cast<float>(u(rng));
        return v;
    };
    for (int k : {1, 3, 63, 64, 65, 130, 1000}) {
        for (int m : {1, 2, 15, 16, 17, 33, 47}) {
            for (int n : {1, 17, 33, 64}) {
                SCOPED_TRACE(std::string(GetParam()) + " m=" + std::to_string(m) + " n=" + std::to_string(n) +
                             " k=" + std::to_string(k));
                auto a = ints(static_cast<size_t>(m) * k, cpu::k_qa_max);
                auto w = ints(static_cast<size_t>(n) * k, cpu::k_qw_max);
                // Row 0 and channel 0 at the extremes (the largest sums, every u8 at 255 or 1); every other row
                // and channel gets its one full-range value so its scale is exactly 1.
                for (int kk = 0; kk < k; ++kk) a[kk] = (kk % 3 == 0) ? -127.0f : 127.0f;
                const float wm = static_cast<float>(cpu::k_qw_max);
                for (int kk = 0; kk < k; ++kk) w[kk] = (kk % 3 == 0) ? -wm : wm;
                for (int i = 1; i < m; ++i) a[static_cast<size_t>(i) * k + (i % k)] = (i % 2) ? 127.0f : -127.0f;
                for (int j = 1; j < n; ++j) w[static_cast<size_t>(j) * k + (j % k)] = (j % 2) ? -wm : wm;
                const cpu::qweight qw = cpu::quantize_weight(w.data(), n, k, k);
                std::vector<float> c(static_cast<size_t>(m) * n), scratch(cpu::gemm_scratch_floats(k));
                cpu::qgemm_packed(m, a.data(), k, qw, c.data(), n, cpu::epilogue{}, scratch.data());
                for (int i = 0; i < m; ++i) {
                    for (int j = 0; j < n; ++j) {
                        int64_t sum = 0;
                        for (int kk = 0; kk < k; ++kk) {
                            sum += static_cast<int64_t>(a[static_cast<size_t>(i) * k + kk]) *
                                   static_cast<int64_t>(w[static_cast<size_t>(j) * k + kk]);
                        }
                        ASSERT_EQ(c[static_cast<size_t>(i) * n + j], static_cast<float>(sum)) << "row " << i << " column " << j;
                    }
                }
            }
        }
    }
}

INSTANTIATE_TEST_SUITE_P(kernel, cpu_qgemm_sums, ::testing::Values("amx", "avx512vnni", "avxvnni", "avx2"),
                         [](const ::testing::TestParamInfo<const char *> & i) { return std::string(i.param); });

TEST(cpu_qgemm, unknown_kernel_name_is_refused) {
    const std::string before = cpu::qgemm_isa();
    EXPECT_FALSE(cpu::qgemm_select_isa("sse2"));
    EXPECT_EQ(before, cpu::qgemm_isa());
}

TEST(cpu_qgemm, weight_quantisation_is_per_channel_and_within_half_a_step) {
    const int  n = 37, k = 13;
    auto       w = random_vec(static_cast<size_t>(n) * k, 41);
    for (int kk = 0; kk < k; ++kk) w[5 * k + kk] = 0.0f;          // an all-zero channel
    for (int kk = 0; kk < k; ++kk) w[6 * k + kk] *= 1000.0f;      // a channel 1000x wider
    const cpu::qweight q = cpu::quantize_weight(w.data(), n, k, k);
    ASSERT_EQ(q.kq, 4);
    for (int j = 0; j < n; ++j) {
        const int8_t * p    = q.panel(j / cpu::k_gemm_nr) + (j % cpu::k_gemm_nr) * 4;
        float          amax = 0.0f;
        int            sum = 0, top = 0;
        for (int kk = 0; kk < k; ++kk) amax = std::max(amax, std::fabs(w[j * k + kk]));
        EXPECT_FLOAT_EQ(q.scale[j], amax / cpu::k_qw_max) << "channel " << j;
        for (int kk = 0; kk < 16; ++kk) {
            const int v = p[(kk / 4) * 4 * cpu::k_gemm_nr + kk % 4];
            if (kk >= k) {
                EXPECT_EQ(v, 0) << "k padding of channel " << j;
                continue;
            }
            EXPECT_LE(std::abs(v), cpu::k_qw_max);
            EXPECT_LE(std::fabs(v * q.scale[j] - w[j * k + kk]), 0.5f * q.scale[j] * 1.0001f + 1e-30f) << j << "," << kk;
            sum += v;
            top = std::max(top, std::abs(v));
        }
        EXPECT_EQ(q.comp[j], 128 * sum);
        EXPECT_EQ(top, j == 5 ? 0 : cpu::k_qw_max) << "channel " << j << " does not use its full range";
    }
}

TEST(cpu_qgemm, weight_panels_start_on_cache_lines) {
    // Each 64-byte AMX tile row of a panel must be one cache line (one that straddles two loads at 0.6-0.7x the
    // rate); panels are kqp * 128 bytes, a multiple of 64, so the data's start decides it.
    for (int n : {1, 37, 100}) {
        const auto         w = random_vec(static_cast<size_t>(n) * 45, 42);
        const cpu::qweight q = cpu::quantize_weight(w.data(), n, 45, 45);
        EXPECT_EQ(reinterpret_cast<uintptr_t>(q.data.data()) % 64, 0u) << "n = " << n;
    }
}

TEST(cpu_qgemm, int8_product_is_within_the_quantisation_bound_of_the_float_product) {
    // |x_q s_a - x| <= s_a/2 and |w_q s_w - w| <= s_w/2 bound each term's error by
    // |x| s_w/2 + |w| s_a/2 + s_a s_w/4; the sum of those bounds the output's (float rounding aside).
    const int  m = 23, n = 45, k = 301;
    auto       a = random_vec(static_cast<size_t>(m) * k, 51, -2.0f, 3.0f);
    for (int i = 0; i < m; ++i) a[static_cast<size_t>(i) * k + 7] = 40.0f;  // an outlier channel
    const auto w = random_vec(static_cast<size_t>(n) * k, 52);
    const cpu::qweight qw = cpu::quantize_weight(w.data(), n, k, k);
    std::vector<float> c(static_cast<size_t>(m) * n), scratch(cpu::gemm_scratch_floats(k));
    cpu::qgemm_packed(m, a.data(), k, qw, c.data(), n, cpu::epilogue{}, scratch.data());
    double worst_ratio = 0.0;
    for (int i = 0; i < m; ++i) {
        float amax = 0.0f;
        for (int kk = 0; kk < k; ++kk) amax = std::max(amax, std::fabs(a[static_cast<size_t>(i) * k + kk]));
        const double sa = amax / 127.0;
        for (int j = 0; j < n; ++j) {
            double exact = 0.0, bound = 0.0;
            for (int kk = 0; kk < k; ++kk) {
                const double x = a[static_cast<size_t>(i) * k + kk], y = w[static_cast<size_t>(j) * k + kk];
                exact += x * y;
                bound += std::fabs(x) * qw.scale[j] / 2 + std::fabs(y) * sa / 2 + sa * qw.scale[j] / 4;
            }
            const double err = std::fabs(c[static_cast<size_t>(i) * n + j] - exact);
            EXPECT_LE(err, bound * 1.001 + 1e-5) << i << "," << j;
            worst_ratio = std::max(worst_ratio, err / bound);
        }
    }
    // Random rounding errors cancel: far below the worst case, but not zero (the product is quantised).
    EXPECT_GT(worst_ratio, 0.0);
    EXPECT_LT(worst_ratio, 0.5);
}

}  // namespace
