// The operands of one GEMM test case, shared by the float (gemm-test) and int8 (qgemm-test) GEMM tests: A with
// padded rows, the weights, the epilogue's vectors, the LayerNorm prologue's gains, and an output of padded rows
// between guard floats (so a store past a tile's edge shows), drawn from seeds that start at `seed0` (each test
// file its own), plus the sizes both kernels' tests run beyond their own tile-shaped tables.
#pragma once

#include "engines/cpu/gemm.h"
#include "random-vec.h"

#include <cstdint>
#include <vector>

namespace rfdetr::test {

constexpr float k_guard = 12345.0f;
constexpr int   k_pad   = 64;  // guard floats before and after the output

struct gemm_case {
    int                      m, n, k, lda, ldc;
    std::vector<float>       a, w, bias, scale, g, b, c;
    rfdetr::cpu::epilogue    e;
    rfdetr::cpu::a_layernorm ln;

    gemm_case(int m_, int n_, int k_, rfdetr::cpu::epi kind, uint32_t seed0)
        : m(m_), n(n_), k(k_), lda(k_ + 3), ldc(n_ + 5),
          a(random_vec(static_cast<size_t>(m_) * lda, seed0 + 1 + m_, -2.0f, 3.0f)),
          w(random_vec(static_cast<size_t>(n_) * k_, seed0 + 2 + n_)),
          bias(random_vec(n_, seed0 + 3)),
          scale(random_vec(n_, seed0 + 4, 0.1f, 1.0f)),
          g(random_vec(k_, seed0 + 5, 0.5f, 1.5f)),
          b(random_vec(k_, seed0 + 6)),
          c(2 * k_pad + static_cast<size_t>(m_) * ldc, k_guard),
          ln{g.data(), b.data(), 1e-6f} {
        const auto init = random_vec(static_cast<size_t>(m) * ldc, seed0 + 7);
        for (int i = 0; i < m; ++i) {
            for (int j = 0; j < n; ++j) c[k_pad + static_cast<size_t>(i) * ldc + j] = init[static_cast<size_t>(i) * ldc + j];
        }
        e.kind  = kind;
        e.bias  = bias.data();
        e.scale = scale.data();
        e.alpha = 0.125f;
    }
    gemm_case(const gemm_case &)             = delete;  // e and ln point into the vectors
    gemm_case & operator=(const gemm_case &) = delete;
};

// Every epilogue on one odd size, the LayerNorm prologue, and k or m large enough for several row blocks
// (the L2-sized A block): check(m, n, k, kind, with_ln) for each.
template <class Check> void for_each_epilogue_case(Check check) {
    for (auto kind : {rfdetr::cpu::epi::accumulate, rfdetr::cpu::epi::bias, rfdetr::cpu::epi::bias_relu,
                      rfdetr::cpu::epi::bias_gelu, rfdetr::cpu::epi::bias_scale_add, rfdetr::cpu::epi::bias_residual,
                      rfdetr::cpu::epi::bias_gelu_add}) {
        check(43, 75, 19, kind, false);
    }
    check(61, 45, 29, rfdetr::cpu::epi::bias, true);
    check(97, 40, 1543, rfdetr::cpu::epi::bias_scale_add, false);
    check(1031, 33, 101, rfdetr::cpu::epi::bias_gelu, true);
}

}  // namespace rfdetr::test
