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
