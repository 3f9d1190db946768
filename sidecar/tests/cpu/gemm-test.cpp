// The packed-weight GEMM (gemm.h) against the plain-loop reference, on odd sizes, with every epilogue and
// the LayerNorm prologue, under each kernel (a kernel this CPU lacks is a skip, isa-test.h).
// Outputs sit between guard floats so a store past a tile's edge fails the test.
#include "engines/cpu/gemm.h"
#include "engines/cpu/kernels.h"

#include "gemm-case.h"
#include "isa-test.h"
#include "random-vec.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

namespace {

using rfdetr::test::gemm_case;
using rfdetr::test::k_guard;
using rfdetr::test::k_pad;
using rfdetr::test::random_vec;

// Reference: t = LN?(a) * w^T (kernels-ref.cpp, double accumulation), then the epilogue in float in the
// reference's order.
std::vector<float> reference(int m, int n, int k, const std::vector<float> & a, int lda, const std::vector<float> & w,
                             const rfdetr::cpu::epilogue & e, const rfdetr::cpu::a_layernorm * ln,
                             const std::vector<float> & c_in, int ldc) {
    std::vector<float> c = c_in;
    std::vector<float> an(static_cast<size_t>(m) * k), t(static_cast<size_t>(m) * n);
    for (int i = 0; i < m; ++i) {
        const float * ar = a.data() + static_cast<size_t>(i) * lda;
        float *       dr = an.data() + static_cast<size_t>(i) * k;
        if (ln) {
            rfdetr::ref::layernorm(ar, k, dr, k, 1, k, ln->gamma, ln->beta, ln->eps);
        } else {
            std::copy(ar, ar + k, dr);
        }
    }
    rfdetr::ref::gemm(m, n, k, 1.0f, an.data(), k, w.data(), k, true, 0.0f, t.data(), n);
    for (int i = 0; i < m; ++i) {
        for (int j = 0; j < n; ++j) {
            const float tv = t[static_cast<size_t>(i) * n + j];
            float &     cv = c[k_pad + static_cast<size_t>(i) * ldc + j];
            switch (e.kind) {
                case rfdetr::cpu::epi::store: cv = e.alpha * tv; break;
                case rfdetr::cpu::epi::accumulate: cv = cv + tv; break;
                case rfdetr::cpu::epi::bias: cv = tv + e.bias[j]; break;
                case rfdetr::cpu::epi::bias_relu: cv = std::max(tv + e.bias[j], 0.0f); break;
                case rfdetr::cpu::epi::bias_gelu: cv = rfdetr::ref::gelu(tv + e.bias[j]); break;
                case rfdetr::cpu::epi::bias_scale_add: cv = (tv + e.bias[j]) * e.scale[j] + cv; break;
                case rfdetr::cpu::epi::bias_residual: cv = (tv + e.bias[j]) + cv; break;
                case rfdetr::cpu::epi::bias_gelu_add: cv = rfdetr::ref::gelu(tv + e.bias[j]) + cv; break;
            }
        }
    }
    return c;
}

void check(const char * isa, int m, int n, int k, rfdetr::cpu::epi kind, bool with_ln) {
    SCOPED_TRACE(std::string(isa) + " m=" + std::to_string(m) + " n=" + std::to_string(n) + " k=" +
                 std::to_string(k) + " epi=" + std::to_string(static_cast<int>(kind)) + (with_ln ? " +LN" : ""));
    gemm_case  t(m, n, k, kind, 10);
    const int  lda = t.lda, ldc = t.ldc;
    const auto & a = t.a;
    const auto & w = t.w;
    const auto & e = t.e;
    const auto & ln = t.ln;
    auto &       c  = t.c;
    const auto want = reference(m, n, k, a, lda, w, e, with_ln ? &ln : nullptr, c, ldc);

    const auto                pw = rfdetr::cpu::pack_weight(w.data(), n, k, k);
    std::vector<float>        scratch(rfdetr::cpu::gemm_scratch_floats(k));
    rfdetr::cpu::gemm_packed(m, a.data(), lda, pw, c.data() + k_pad, ldc, e, scratch.data(), with_ln ? &ln : nullptr);
    double worst = 0.0;
    for (size_t i = 0; i < c.size(); ++i) {
        ASSERT_TRUE(std::isfinite(c[i])) << "non-finite at " << i;
        if (want[i] == k_guard) {
            ASSERT_EQ(c[i], k_guard) << "store outside the output (or into its row padding) at float " << i;
            continue;
        }
        worst = std::max(worst, std::fabs(static_cast<double>(c[i]) - want[i]) / (1.0 + std::fabs(want[i])));
    }
    // Float accumulation over k terms of magnitude <= 3 against a double reference.
    EXPECT_LE(worst, 2e-6 * std::sqrt(static_cast<double>(k)) + 1e-6);
}

// The order gemm.h promises, in scalar float: per output, chunks of k_gemm_chunk fused multiply-adds in k order
// from zero, each chunk's total added to the running one, then the epilogue (only those whose float arithmetic is
// plain: the GELU's vector erf is checked against the reference above). The A rows go through the engine's own
// layernorm_row when the GEMM has a LayerNorm prologue. Each step is rounded to float on its own (std::fma, and a
// volatile between a product and a sum so no compiler contracts them).
std::vector<float> blocked_order(int m, int n, int k, const std::vector<float> & a, int lda, const std::vector<float> & w,
                                 const rfdetr::cpu::epilogue & e, const rfdetr::cpu::a_layernorm * ln,
                                 std::vector<float> c, int ldc) {
    std::vector<float> row(k);
    for (int i = 0; i < m; ++i) {
        const float * ar = a.data() + static_cast<size_t>(i) * lda;
        if (ln) {
            rfdetr::cpu::layernorm_row(ar, row.data(), k, ln->gamma, ln->beta, ln->eps);
        } else {
            std::copy(ar, ar + k, row.begin());
        }
        for (int j = 0; j < n; ++j) {
            float total = 0.0f;
            for (int k0 = 0; k0 < k; k0 += rfdetr::cpu::k_gemm_chunk) {
                float s = 0.0f;
                for (int kk = k0; kk < std::min(k, k0 + rfdetr::cpu::k_gemm_chunk); ++kk) {
                    s = std::fma(row[kk], w[static_cast<size_t>(j) * k + kk], s);
                }
                total = k0 == 0 ? s : total + s;
            }
            float &        cv = c[k_pad + static_cast<size_t>(i) * ldc + j];
            volatile float u  = 0.0f;
            switch (e.kind) {
                case rfdetr::cpu::epi::store: cv = e.alpha * total; break;
                case rfdetr::cpu::epi::accumulate: cv = cv + total; break;
                case rfdetr::cpu::epi::bias: cv = total + e.bias[j]; break;
                case rfdetr::cpu::epi::bias_relu: cv = std::max(total + e.bias[j], 0.0f); break;
                case rfdetr::cpu::epi::bias_scale_add:
                    u  = (total + e.bias[j]) * e.scale[j];
                    cv = u + cv;
                    break;
                case rfdetr::cpu::epi::bias_residual: cv = (total + e.bias[j]) + cv; break;
                default: ADD_FAILURE() << "blocked_order: no exact form of epilogue " << static_cast<int>(e.kind); break;
            }
        }
    }
    return c;
}

class cpu_gemm : public rfdetr::test::isa_test {};
RFDETR_FOR_EVERY_ISA(cpu_gemm);

TEST_P(cpu_gemm, packed_gemm_matches_reference_on_odd_sizes) {
    const char * isa = this->isa();
    {
        // m around the tile heights (6, 14) and the row-block size; n around the 32-column panels.
        for (int m : {1, 5, 6, 13, 14, 15, 29, 300}) {
            for (int n : {1, 7, 16, 17, 31, 32, 33, 91}) check(isa, m, n, 37, rfdetr::cpu::epi::store, false);
        }
        rfdetr::test::for_each_epilogue_case([isa](int m, int n, int k, rfdetr::cpu::epi kind, bool with_ln) { check(isa, m, n, k, kind, with_ln); });
    }
}

TEST_P(cpu_gemm, packed_gemm_keeps_the_blocked_summation_order_bit_for_bit) {
    // k across the chunk edges (127-129, 257, 1543), m across the tile heights and past one L2 row block (the
    // panels' k-chunk passes, the running totals per tile, the next-slice prefetch at a block's last panel), n
    // across the panel edges; every plain epilogue and the LayerNorm prologue.
    const char * isa = this->isa();
    struct shape { int m, n, k; rfdetr::cpu::epi kind; bool ln; };
    const shape shapes[] = {
        {1, 1, 1, rfdetr::cpu::epi::store, false},          {13, 33, 127, rfdetr::cpu::epi::bias, false},
        {15, 32, 128, rfdetr::cpu::epi::accumulate, false}, {29, 31, 129, rfdetr::cpu::epi::bias_relu, true},
        {43, 65, 257, rfdetr::cpu::epi::bias_scale_add, true}, {97, 40, 1543, rfdetr::cpu::epi::bias_residual, false},
        {1031, 33, 384, rfdetr::cpu::epi::bias_scale_add, false}, {2100, 17, 200, rfdetr::cpu::epi::bias, true},
    };
    for (const auto & sh : shapes) {
        SCOPED_TRACE(std::string(isa) + " m=" + std::to_string(sh.m) + " n=" + std::to_string(sh.n) +
                     " k=" + std::to_string(sh.k) + (sh.ln ? " +LN" : ""));
        gemm_case  t(sh.m, sh.n, sh.k, sh.kind, 30);
        const auto want = blocked_order(sh.m, sh.n, sh.k, t.a, t.lda, t.w, t.e, sh.ln ? &t.ln : nullptr, t.c, t.ldc);
        const auto pw   = rfdetr::cpu::pack_weight(t.w.data(), sh.n, sh.k, sh.k);
        std::vector<float> scratch(rfdetr::cpu::gemm_scratch_floats(sh.k));
        rfdetr::cpu::gemm_packed(sh.m, t.a.data(), t.lda, pw, t.c.data() + k_pad, t.ldc, t.e, scratch.data(),
                                 sh.ln ? &t.ln : nullptr);
        size_t wrong = 0, first = 0;
        for (size_t i = 0; i < t.c.size(); ++i) {
            if (t.c[i] != want[i] && wrong++ == 0) first = i;
        }
        EXPECT_EQ(wrong, 0u) << "floats differing from the blocked summation order; first at " << first << ": "
                             << t.c[first] << " instead of " << want[first];
    }
}

TEST_P(cpu_gemm, conv3x3_gives_the_bits_of_im2col_then_gemm) {
    // gemm_conv3x3 packs the 3x3 convolution's A straight from the map; it must give, float for float, im2col_3x3's
    // rows through gemm_packed. Odd maps and channels (k = 9 ch across the 128-deep chunks), pixel ranges that
    // start mid-row, a range past one L2 row block (ch 128: 84-row blocks), output between guard floats.
    const char * isa = this->isa();
    struct shape { int h, w, ch, ld, n, p0, m; };
    const shape shapes[] = {{1, 1, 3, 3, 5, 0, 1},         {5, 7, 19, 23, 37, 0, 35},  {5, 7, 19, 23, 37, 8, 19},
                            {3, 4, 1, 2, 33, 5, 7},        {11, 11, 128, 131, 33, 3, 118}};
    for (const auto & sh : shapes) {
        SCOPED_TRACE(std::string(isa) + " h=" + std::to_string(sh.h) + " w=" + std::to_string(sh.w) + " ch=" +
                     std::to_string(sh.ch) + " n=" + std::to_string(sh.n) + " pixels " + std::to_string(sh.p0) + "+" +
                     std::to_string(sh.m));
        const int  k    = 9 * sh.ch, ldc = sh.n + 3;
        const auto x    = random_vec(static_cast<size_t>(sh.h) * sh.w * sh.ld, 50 + sh.ch);
        const auto wt   = random_vec(static_cast<size_t>(sh.n) * k, 51 + sh.ch);
        const auto bias = random_vec(sh.n, 52);
        const auto pw   = rfdetr::cpu::pack_weight(wt.data(), sh.n, k, k);
        rfdetr::cpu::epilogue e;
        e.kind = rfdetr::cpu::epi::bias;
        e.bias = bias.data();
        std::vector<float> cols(static_cast<size_t>(sh.h) * sh.w * k, 0.0f);
        rfdetr::cpu::im2col_3x3(x.data(), sh.ld, sh.h, sh.w, sh.ch, cols.data(), 0, sh.h);
        std::vector<float> scratch(rfdetr::cpu::gemm_scratch_floats(k));
        std::vector<float> want(static_cast<size_t>(sh.m) * ldc + 2 * k_pad, k_guard), got = want;
        rfdetr::cpu::gemm_packed(sh.m, cols.data() + static_cast<size_t>(sh.p0) * k, k, pw, want.data() + k_pad, ldc,
                                 e, scratch.data());
        std::fill(scratch.begin(), scratch.end(), 1e30f);  // nothing may be read before it is written
        rfdetr::cpu::gemm_conv3x3(x.data(), sh.ld, sh.h, sh.w, sh.ch, sh.p0, sh.m, pw, got.data() + k_pad, ldc, e,
                                  scratch.data());
        size_t wrong = 0, first = 0;
        for (size_t i = 0; i < got.size(); ++i) {
            if (std::memcmp(&got[i], &want[i], 4) != 0 && wrong++ == 0) first = i;
        }
        EXPECT_EQ(wrong, 0u) << "floats differing from im2col + gemm_packed; first at " << first << " (output row "
                             << (static_cast<long>(first) - k_pad) / ldc << "): " << got[first] << " instead of "
                             << want[first];
    }
}

TEST_P(cpu_gemm, tile_keeps_the_blocked_summation_order_bit_for_bit) {
    // gemm_tile (the attention's path) over k = 300: three chunks run back to back on one tile.
    const char * isa = this->isa();
    const int    rows = rfdetr::cpu::gemm_mr(), k = 300, ncols = 29;
    const auto   a = random_vec(static_cast<size_t>(k) * rows, 41), b = random_vec(static_cast<size_t>(k) * 32, 42);
    std::vector<float> c(static_cast<size_t>(rows) * 32, k_guard);
    rfdetr::cpu::gemm_tile(rows, k, a.data(), rows, b.data(), 32, c.data(), 32, ncols, rfdetr::cpu::epilogue{});
    for (int r = 0; r < rows; ++r) {
        for (int j = 0; j < 32; ++j) {
            float total = 0.0f;
            for (int k0 = 0; k0 < k; k0 += rfdetr::cpu::k_gemm_chunk) {
                float s = 0.0f;
                for (int kk = k0; kk < std::min(k, k0 + rfdetr::cpu::k_gemm_chunk); ++kk) {
                    s = std::fma(a[static_cast<size_t>(kk) * rows + r], b[static_cast<size_t>(kk) * 32 + j], s);
                }
                total = k0 == 0 ? s : total + s;
            }
            EXPECT_EQ(c[r * 32 + j], j < ncols ? total : k_guard) << isa << " r=" << r << " j=" << j;
        }
    }
}

TEST_P(cpu_gemm, tile_reads_strided_operands) {
    // gemm_tile as the attention uses it: A with a row stride wider than the tile, B straight from a
    // row-major matrix (ldb > 32), a partial last column group.
    const char * isa = this->isa();
    {
        const int  rows = rfdetr::cpu::gemm_mr() - 1, k = 23, as = 40, ldb = 70, ncols = 27, ldc = 33;
        const auto a = random_vec(static_cast<size_t>(k) * as, 21), b = random_vec(static_cast<size_t>(k) * ldb, 22);
        std::vector<float> c(static_cast<size_t>(rows) * ldc, k_guard);
        rfdetr::cpu::epilogue e;
        rfdetr::cpu::gemm_tile(rows, k, a.data(), as, b.data(), ldb, c.data(), ldc, ncols, e);
        for (int r = 0; r < rows; ++r) {
            for (int j = 0; j < ldc; ++j) {
                if (j >= ncols) {
                    EXPECT_EQ(c[r * ldc + j], k_guard) << isa << " wrote column " << j;
                    continue;
                }
                double s2 = 0.0;
                for (int kk = 0; kk < k; ++kk) s2 += static_cast<double>(a[kk * as + r]) * b[kk * ldb + j];
                EXPECT_NEAR(c[r * ldc + j], s2, 1e-5) << isa << " r=" << r << " j=" << j;
            }
        }
    }
}

}  // namespace
