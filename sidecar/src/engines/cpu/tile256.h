// The AVX2 register tile that the GEMM's chunk256 and the attention's scores256 / pv256 share: R rows x 16 columns
// in two accumulators per row (c0: columns 0-7, c1: 8-15); a k step loads B's 16 floats and broadcasts A's R
// values, and the sums run in k order from zero, so every user of it gets the same bits for the same operands.
#pragma once

#include <immintrin.h>

namespace rfdetr::cpu {

template <int R> __attribute__((always_inline)) inline void tile256_zero(__m256 (&c0)[R], __m256 (&c1)[R]) {
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) c0[r] = c1[r] = _mm256_setzero_ps();
}

// One k step: c[r] += a[r] * b[0, 16) for r < R.
template <int R>
__attribute__((always_inline)) inline void tile256_step(const float * a, const float * b, __m256 (&c0)[R], __m256 (&c1)[R]) {
    const __m256 b0 = _mm256_loadu_ps(b), b1 = _mm256_loadu_ps(b + 8);
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) {
        const __m256 av = _mm256_broadcast_ss(a + r);
        c0[r]           = _mm256_fmadd_ps(av, b0, c0[r]);
        c1[r]           = _mm256_fmadd_ps(av, b1, c1[r]);
    }
}

// k steps, A's rows at stride as per step, B's at ldb, four steps per iteration (the loop's own instructions cost
// Zen 3 a quarter of the FMA rate rolled: an L1 6 x 16 loop at k 128 ran 66 GFLOP/s rolled, 91 unrolled, of 94).
template <int R>
__attribute__((always_inline)) inline void tile256_run(int k, const float * a, int as, const float * b, int ldb,
                                                       __m256 (&c0)[R], __m256 (&c1)[R]) {
#pragma GCC unroll 4
    for (int kk = 0; kk < k; ++kk, a += as, b += ldb) tile256_step<R>(a, b, c0, c1);
}

}  // namespace rfdetr::cpu
