// attention-bf16-kernel.h's products with AVX512-BF16 (vdpbf16ps: 16 fp32 lanes, each the sum of a bf16
// pair's two products): a query's (or a probability row's) pair broadcast against a 16-wide row of packed
// K (or V), 16 accumulators per step. Only these functions carry the AVX512-BF16 target.
// GCC 12 reports its own AVX-512 intrinsics' undefined operands as (maybe-)uninitialized (see qgemm.cpp).
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"

#include "engines/cpu/attention-bf16-kernel.h"

#include <immintrin.h>

#include <cmath>
#include <cstring>

#define RFDETR_AVX512_BF16 __attribute__((target("avx512f,avx512bw,avx512bf16")))

namespace rfdetr::cpu {

namespace {

RFDETR_AVX512_BF16 inline __m512 dp(__m512 acc, __m512i a, __m512i b) {
    return _mm512_dpbf16_ps(acc, (__m512bh)a, (__m512bh)b);
}

RFDETR_AVX512_BF16 inline __m512i pair(const uint16_t * x) {
    uint32_t v;
    std::memcpy(&v, x, 4);
    return _mm512_set1_epi32(static_cast<int>(v));
}

// s = qb K^T, 8 queries x 32 keys per step of the d pairs.
RFDETR_AVX512_BF16 void scores(const uint16_t * qb, int d, const uint16_t * kp, int nkp, int nk, float * s, int lds,
                               float * mx) {
    __m512 rmax[k_attn_rows];
    for (auto & a : rmax) a = _mm512_set1_ps(-INFINITY);
    for (int g = 0; g < nkp; g += 32) {
        const uint16_t * k0 = kp + static_cast<size_t>(g) * d;
        const uint16_t * k1 = k0 + static_cast<size_t>(16) * d;
        for (int i0 = 0; i0 < k_attn_rows; i0 += 8) {
            __m512 acc[8][2];
            for (int i = 0; i < 8; ++i) acc[i][0] = acc[i][1] = _mm512_setzero_ps();
            for (int r = 0; r < d / 2; ++r) {
                const __m512i b0 = _mm512_loadu_si512(k0 + r * 32);
                const __m512i b1 = _mm512_loadu_si512(k1 + r * 32);
                for (int i = 0; i < 8; ++i) {
                    const __m512i a = pair(qb + static_cast<size_t>(i0 + i) * d + 2 * r);
                    acc[i][0]       = dp(acc[i][0], a, b0);
                    acc[i][1]       = dp(acc[i][1], a, b1);
                }
            }
            for (int i = 0; i < 8; ++i) {
                float * row = s + static_cast<size_t>(i0 + i) * lds + g;
                _mm512_storeu_ps(row, acc[i][0]);
                _mm512_storeu_ps(row + 16, acc[i][1]);
            }
        }
        block_max(s + g, lds, nk - g, rmax);
    }
    for (int i = 0; i < k_attn_rows; ++i) mx[i] = _mm512_reduce_max_ps(rmax[i]);
}

// o = P V, 16 / NC rows x NC column blocks of 16 per step of the key pairs (NC = d / 16 when d <= 64).
template <int NC>
RFDETR_AVX512_BF16 void pv_cols(const uint16_t * p, int ldp, const uint16_t * vp, int nkp, int c0, int d, float * o) {
    constexpr int R        = 16 / NC;
    const size_t  col_tile = static_cast<size_t>(nkp) * 16;
    const uint16_t * v     = vp + static_cast<size_t>(c0 / 16) * col_tile;
    for (int i0 = 0; i0 < k_attn_rows; i0 += R) {
        __m512 acc[R][NC];
        for (int i = 0; i < R; ++i) {
            for (int c = 0; c < NC; ++c) acc[i][c] = _mm512_setzero_ps();
        }
        for (int j = 0; j < nkp / 2; ++j) {
            __m512i b[NC];
            for (int c = 0; c < NC; ++c) b[c] = _mm512_loadu_si512(v + c * col_tile + static_cast<size_t>(j) * 32);
            for (int i = 0; i < R; ++i) {
                const __m512i a = pair(p + static_cast<size_t>(i0 + i) * ldp + 2 * j);
                for (int c = 0; c < NC; ++c) acc[i][c] = dp(acc[i][c], a, b[c]);
            }
        }
        for (int i = 0; i < R; ++i) {
            for (int c = 0; c < NC; ++c) _mm512_storeu_ps(o + static_cast<size_t>(i0 + i) * d + c0 + 16 * c, acc[i][c]);
        }
    }
}

RFDETR_AVX512_BF16 void pv(const uint16_t * p, int ldp, const uint16_t * vp, int nkp, int d, float * o) {
    int c0 = 0;
    for (; c0 + 64 <= d; c0 += 64) pv_cols<4>(p, ldp, vp, nkp, c0, d, o);
    for (; c0 < d; c0 += 32) pv_cols<2>(p, ldp, vp, nkp, c0, d, o);
}

}  // namespace

const attn_bf16_kernel k_attn_avx512bf16 = {"avx512bf16", scores, pv, nullptr, nullptr};

}  // namespace rfdetr::cpu
