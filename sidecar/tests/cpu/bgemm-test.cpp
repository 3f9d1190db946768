// The bf16 GEMM (bgemm.h): the rounding to bf16 (scalar form = the hardware's vcvtne2ps2bf16), the weight
// packing, and each kernel (AMX, AVX512-BF16) on odd sizes with every epilogue and the LayerNorm prologue:
// (a) operands exact in bf16 whose sums are exact in fp32 (small integers times powers of two) give the
// plain-loop result bit for bit (GELU within its vectorised erf); (b) random operands are within the fp32
// summation bound of the double-accumulated product of the bf16-rounded operands. A kernel this CPU lacks is a
// skip (a failure under RFDETR_REQUIRE_ALL=1). Outputs sit between guard floats so a store past a tile's edge fails.
#include "engines/cpu/bgemm-kernel.h"
#include "engines/cpu/bgemm.h"
#include "engines/cpu/kernels.h"
#include "common/error.h"

#include "gemm-case.h"
#include "random-vec.h"
#include "skip.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

namespace {

using rfdetr::test::gemm_case;
using rfdetr::test::k_guard;
using rfdetr::test::k_pad;
namespace cpu = rfdetr::cpu;

struct bisa_scope {
    explicit bisa_scope(const char * isa) : before(cpu::bgemm_isa()), ok(cpu::bgemm_select_isa(isa)) {}
    ~bisa_scope() { cpu::bgemm_select_isa(before.c_str()); }
    std::string before;
    bool        ok;
};

uint32_t bits(float x) {
    uint32_t u;
    std::memcpy(&u, &x, 4);
    return u;
}
float from_bits(uint32_t u) {
    float x;
    std::memcpy(&x, &u, 4);
    return x;
}

bool is_gelu(cpu::epi kind) { return kind == cpu::epi::bias_gelu || kind == cpu::epi::bias_gelu_add; }

// Small integers times powers of two: exact in bf16 (at most 3 significant bits), and with |a| <= 14, |w| <= 7,
// steps of 2^-3 and k <= 1600 every partial sum is a multiple of 2^-3 below 2^18: exact in fp32.
void make_exact(gemm_case & t, uint32_t seed) {
    std::mt19937 rng(seed);
    auto         pick = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
    for (auto & v : t.a) v = std::ldexp(static_cast<float>(pick(-7, 7)), pick(-1, 1));
    for (auto & v : t.w) v = std::ldexp(static_cast<float>(pick(-7, 7)), pick(-2, 0));
}

// One case on the selected kernel. exact: make_exact operands, no LayerNorm, the result equal bit for bit.
void check(int m, int n, int k, cpu::epi kind, bool with_ln, bool exact) {
    SCOPED_TRACE(std::string(cpu::bgemm_isa()) + " m=" + std::to_string(m) + " n=" + std::to_string(n) + " k=" +
                 std::to_string(k) + " epi=" + std::to_string(static_cast<int>(kind)) + (with_ln ? " +LN" : "") +
                 (exact ? " exact" : " random"));
    gemm_case t(m, n, k, kind, 50);
    if (exact) make_exact(t, 1000u + m * 7u + n * 13u + k);
    const int lda = t.lda, ldc = t.ldc;
    // The reference reads the LayerNormed rows (the LayerNorm has its own tests).
    std::vector<float> an(t.a);
    if (with_ln) {
        for (int i = 0; i < m; ++i) {
            cpu::layernorm_row(t.a.data() + static_cast<size_t>(i) * lda, an.data() + static_cast<size_t>(i) * lda, k,
                               t.g.data(), t.b.data(), t.ln.eps);
        }
    }
    const cpu::bweight bw   = cpu::to_bweight(t.w.data(), n, k, k);
    std::vector<float> want = t.c;
    cpu::bgemm_ref(m, an.data(), lda, bw, want.data() + k_pad, ldc, t.e);

    std::vector<float> scratch(cpu::gemm_scratch_floats(k));
    auto &             c = t.c;
    cpu::bgemm_packed(m, t.a.data(), lda, bw, c.data() + k_pad, ldc, t.e, scratch.data(), with_ln ? &t.ln : nullptr);
    for (size_t i = 0; i < c.size(); ++i) {
        if (want[i] == k_guard) {
            ASSERT_EQ(c[i], k_guard) << "store outside the output (or into its row padding) at float " << i;
            continue;
        }
        const size_t r = (i - k_pad) / ldc, j = (i - k_pad) % ldc;
        if (exact && !is_gelu(kind)) {
            ASSERT_EQ(c[i], want[i]) << "at row " << r << " column " << j;
            continue;
        }
        // fp32 summation of k exact products: |error| <= k * 2^-24 * sum |a w| (the epilogue's own roundings
        // and GELU's vectorised erf in the second term).
        double s = 0.0;
        for (int kk = 0; kk < k; ++kk) {
            s += std::fabs(static_cast<double>(cpu::bf16_to_float(cpu::bf16_round(an[r * lda + kk]))) *
                           cpu::bf16_to_float(cpu::bf16_round(t.w[j * k + kk])));
        }
        const double tol = (exact ? 0.0 : k * std::ldexp(s, -24)) * 1.2 + 2e-6 * (1.0 + std::fabs(want[i]));
        ASSERT_NEAR(c[i], want[i], tol) << "at row " << r << " column " << j;
    }
}

void check_all_sizes(bool exact) {
    // m around the tile heights (AVX512-BF16's 14, AMX's 16 and 32) and past a row block; n around the
    // 32-column panels and AMX's 16-column tiles; k not a multiple of 2 (the k pair) nor of 32 (AMX's k step).
    for (int m : {1, 3, 13, 14, 15, 16, 17, 28, 29, 31, 32, 33, 300}) {
        for (int n : {1, 7, 15, 16, 17, 31, 32, 33, 91}) check(m, n, 37, cpu::epi::store, false, exact);
    }
    for (int k : {1, 2, 31, 32, 33, 63, 64, 65, 129}) check(35, 40, k, cpu::epi::bias, false, exact);
    for (auto kind : {cpu::epi::store, cpu::epi::accumulate, cpu::epi::bias, cpu::epi::bias_relu, cpu::epi::bias_gelu,
                      cpu::epi::bias_scale_add, cpu::epi::bias_residual, cpu::epi::bias_gelu_add}) {
        check(43, 75, 19, kind, false, exact);
    }
    check(97, 40, 1543, cpu::epi::bias_scale_add, false, exact);  // several row blocks
    check(1031, 33, 101, cpu::epi::bias_gelu, false, exact);
    if (!exact) {  // the LayerNorm A pass: its rows are not exact in bf16
        check(61, 45, 29, cpu::epi::bias, true, false);
        check(1031, 33, 101, cpu::epi::bias_gelu, true, false);
    }
}

class cpu_bgemm : public ::testing::TestWithParam<const char *> {
  protected:
    void SetUp() override {
        scope_ = std::make_unique<bisa_scope>(GetParam());
        if (!scope_->ok) {
            RFDETR_SKIP_OR_FAIL(std::string("this CPU lacks the ") + GetParam() +
                                " bf16 kernel's instructions (AMX-BF16 / AVX512-BF16, see /proc/cpuinfo's flags)");
        }
    }
    std::unique_ptr<bisa_scope> scope_;
};

TEST_P(cpu_bgemm, exact_operands_give_the_exact_sums_bit_for_bit) { check_all_sizes(true); }

TEST_P(cpu_bgemm, random_operands_are_within_the_fp32_summation_bound) { check_all_sizes(false); }

// The MLP's bf16 hand-off gives the fp32 path's numbers bit for bit: fc1 to bf16 rows = bf16_round of fc1's fp32
// rows (guards around them untouched), and fc2 from those rows = fc2 from the fp32 rows (which it rounds alike).
TEST_P(cpu_bgemm, bf16_handoff_equals_the_fp32_round_trip_bit_for_bit) {
    constexpr uint16_t k_g16 = 0xBEEF;
    // h = 59: a partial last panel (27 columns: both halves masked) of bf16 columns (fc1 only: fc2 needs h a multiple of 32)
    for (int h : {96, 59}) {
    for (int m : {1, 15, 16, 31, 32, 33, 63, 100, 300, 1100}) {  // 1100: two row blocks (1024 at k = 96)
        for (auto kind : {cpu::epi::store, cpu::epi::bias, cpu::epi::bias_relu, cpu::epi::bias_gelu}) {
            SCOPED_TRACE(std::string(cpu::bgemm_isa()) + " m=" + std::to_string(m) + " h=" + std::to_string(h) +
                         " epi=" + std::to_string(static_cast<int>(kind)));
            const int          k = 45, n = 37, ldh = h + 8;  // fc1 [h, k], fc2 [n, h]
            gemm_case          t(m, h, k, kind, 70);
            const auto         w2   = rfdetr::test::random_vec(static_cast<size_t>(n) * h, 71);
            const auto         b2   = rfdetr::test::random_vec(n, 72);
            const cpu::bweight fc1  = cpu::to_bweight(t.w.data(), h, k, k);
            const cpu::bweight fc2  = cpu::to_bweight(w2.data(), n, h, h);
            if (h % 32 && m > 100) continue;
            std::vector<float> scr(cpu::gemm_scratch_floats(std::max(k, h)));
            std::vector<float> hf(static_cast<size_t>(m) * ldh, 0.0f);
            cpu::bgemm_packed(m, t.a.data(), t.lda, fc1, hf.data(), ldh, t.e, scr.data(), &t.ln);
            std::vector<uint16_t> hb(static_cast<size_t>(m + 2) * ldh, k_g16);
            cpu::bgemm_packed_to_bf16(m, t.a.data(), t.lda, fc1, hb.data() + ldh, ldh, t.e, scr.data(), &t.ln);
            for (int i = -1; i <= m; ++i) {
                for (int j = 0; j < ldh; ++j) {
                    const uint16_t got = hb[static_cast<size_t>(i + 1) * ldh + j];
                    if (i < 0 || i == m || j >= h) {
                        ASSERT_EQ(got, k_g16) << "store outside the bf16 rows at row " << i << " column " << j;
                    } else {
                        ASSERT_EQ(got, cpu::bf16_round(hf[static_cast<size_t>(i) * ldh + j])) << "row " << i << " column " << j;
                    }
                }
            }
            if (h % 32) continue;
            cpu::epilogue e2;
            e2.kind = cpu::epi::bias;
            e2.bias = b2.data();
            std::vector<float> want(static_cast<size_t>(m) * n), got(static_cast<size_t>(m) * n);
            cpu::bgemm_packed(m, hf.data(), ldh, fc2, want.data(), n, e2, scr.data());
            cpu::bgemm_packed_from_bf16(m, hb.data() + ldh, ldh, fc2, got.data(), n, e2, scr.data());
            for (size_t i = 0; i < got.size(); ++i) ASSERT_EQ(got[i], want[i]) << "fc2 output " << i;
        }
    }
    }
}

INSTANTIATE_TEST_SUITE_P(kernel, cpu_bgemm, ::testing::Values("amx", "avx512bf16"),
                         [](const ::testing::TestParamInfo<const char *> & i) { return std::string(i.param); });

TEST(cpu_bgemm_round, scalar_rounding_is_nearest_even_and_matches_vcvtne2ps2bf16) {
    // ties to even, just above a tie, NaN quieted, denormals to signed zero, overflow to infinity
    EXPECT_EQ(cpu::bf16_round(from_bits(0x3f808000u)), 0x3f80);  // 1 + 2^-8: tie, to even (down)
    EXPECT_EQ(cpu::bf16_round(from_bits(0x3f818000u)), 0x3f82);  // tie, to even (up)
    EXPECT_EQ(cpu::bf16_round(from_bits(0x3f808001u)), 0x3f81);
    EXPECT_EQ(cpu::bf16_round(from_bits(0x7f800001u)), 0x7fc0);
    EXPECT_EQ(cpu::bf16_round(from_bits(0x800116c2u)), 0x8000);
    EXPECT_EQ(cpu::bf16_round(from_bits(0x7f7fc99eu)), 0x7f80);
    EXPECT_EQ(cpu::bf16_round(-std::numeric_limits<float>::infinity()), 0xff80);
    if (!__builtin_cpu_supports("avx512bf16")) {
        RFDETR_SKIP_OR_FAIL("this CPU has no AVX512-BF16 (see /proc/cpuinfo's flags): no vcvtne2ps2bf16 to compare with");
    }
    // 4096 random bit patterns plus the edges, through the prologue's vector rounding (round_row_bf16)
    std::mt19937       rng(7);
    std::vector<float> x(4096 + 8);
    for (auto & v : x) v = from_bits(rng());
    const uint32_t edges[] = {0x3f808000u, 0x3f818000u, 0x00000001u, 0x807fffffu, 0x00800000u, 0x7f7fffffu, 0x7f800000u, 0xffc00001u};
    for (int i = 0; i < 8; ++i) x[4096 + i] = from_bits(edges[i]);
    const int             kp = static_cast<int>(x.size() + 31) / 32 * 32;
    std::vector<uint16_t> got(kp, 0xdead);
    cpu::round_row_bf16(x.data(), static_cast<int>(x.size()), got.data(), kp);
    for (size_t i = 0; i < x.size(); ++i) ASSERT_EQ(got[i], cpu::bf16_round(x[i])) << "x bits " << std::hex << bits(x[i]);
    for (int i = static_cast<int>(x.size()); i < kp; ++i) ASSERT_EQ(got[i], 0) << "k padding not zero at " << i;
}

TEST(cpu_bgemm_round, weight_panels_hold_the_rounded_weights_in_pairs_zero_padded) {
    const int          n = 37, k = 45;
    std::vector<float> w = rfdetr::test::random_vec(static_cast<size_t>(n) * k, 3);
    const cpu::bweight b = cpu::to_bweight(w.data(), n, k, k);
    ASSERT_EQ(b.kp, 64);
    ASSERT_EQ(b.data.size(), static_cast<size_t>(2) * 64 * 32);
    for (int j = 0; j < 64; ++j) {
        for (int kk = 0; kk < 64; ++kk) {
            const uint16_t got = b.panel(j / 32)[static_cast<size_t>(kk / 2) * 64 + (j % 32) * 2 + kk % 2];
            ASSERT_EQ(got, j < n && kk < k ? cpu::bf16_round(w[static_cast<size_t>(j) * k + kk]) : 0) << j << "," << kk;
        }
    }
}

TEST(cpu_bgemm_round, weight_panels_start_on_cache_lines) {
    // Each 64-byte AMX tile row of a panel must be one cache line (one that straddles two loads at 0.6-0.7x the
    // rate); panels are kp * 64 bytes, a multiple of 64, so the data's start decides it.
    for (int n : {1, 37, 100}) {
        std::vector<float> w = rfdetr::test::random_vec(static_cast<size_t>(n) * 45, 4);
        const cpu::bweight b = cpu::to_bweight(w.data(), n, 45, 45);
        EXPECT_EQ(reinterpret_cast<uintptr_t>(b.data.data()) % 64, 0u) << "n = " << n;
    }
}

TEST(cpu_bgemm_round, bf16_rows_need_whole_k_steps_and_bf16_outputs_take_no_residual) {
    std::string missing;
    if (!cpu::bf16_supported(missing)) RFDETR_SKIP_OR_FAIL("this CPU has no bf16 kernel: " + missing);
    const std::vector<float> w(static_cast<size_t>(8) * 40, 0.5f);
    const cpu::bweight       b = cpu::to_bweight(w.data(), 8, 40, 40);
    std::vector<float>       scr(cpu::gemm_scratch_floats(40)), c(8);
    std::vector<uint16_t>    a(64, 0);
    try {
        cpu::bgemm_packed_from_bf16(1, a.data(), 64, b, c.data(), 8, cpu::epilogue{}, scr.data());
        ADD_FAILURE() << "k = 40 accepted";
    } catch (const rfdetr::error & e) {
        EXPECT_NE(std::string(e.what()).find("k = 40 is not a multiple of 32"), std::string::npos) << e.what();
    }
    cpu::epilogue e;
    e.kind = cpu::epi::bias_residual;
    try {
        cpu::bgemm_packed_to_bf16(1, c.data(), 40, b, a.data(), 8, e, scr.data());
        ADD_FAILURE() << "a residual epilogue into bf16 accepted";
    } catch (const rfdetr::error & e) {
        EXPECT_NE(std::string(e.what()).find("reads c"), std::string::npos) << e.what();
    }
}

TEST(cpu_bgemm_round, unknown_kernel_name_is_refused) {
    const std::string before = cpu::bgemm_isa();
    EXPECT_FALSE(cpu::bgemm_select_isa("avx2"));
    EXPECT_EQ(before, cpu::bgemm_isa());
}

}  // namespace
