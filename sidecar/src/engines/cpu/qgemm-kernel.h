// What the int8 kernels share (qgemm.cpp's AVX2/VNNI tiles, qgemm-amx.cpp's AMX blocks, attention-int8.cpp): the size of
// the quantised row block, the prologue's LayerNorm A pass, the row's absolute maximum and row quantiser, the AVX-512
// VNNI k loop, and the dequantising AVX-512 store of one finished 32-column row into the epilogue, so every kernel
// turns the same int32 sums into the same floats.
#pragma once

#include "engines/cpu/gemm-epilogue.h"
#include "engines/cpu/kernels.h"
#include "engines/cpu/qgemm.h"

#include <immintrin.h>

#include <cstddef>
#include <cstdint>
#include <cstring>

namespace rfdetr::cpu {

// A block of quantised A rows stays in L2 next to the weight panel streaming past it: 192 KB, i.e. 512 rows at
// k = 384, 128 at k = 1536 (the AVX2 kernel's rows take 2 bytes per k: half as many; the float GEMM's block holds
// half as many rows in 384 KB).
constexpr size_t k_qa_block_bytes = 192 * 1024;

// Row x of A as the GEMM reads it: LayerNormed into `row` first when ln is set (the A pass). Returns the row.
inline const float * a_row(const float * x, float * row, int k, const a_layernorm * ln) {
    if (!ln) return x;
    layernorm_row(x, row, k, ln->gamma, ln->beta, ln->eps);
    return row;
}

// Quantises one row x[0, k) into u8 (q + 128) with the per-row scale; writes the 4-byte k groups at
// dst + g * stride (g = k group; stride 4 writes the row contiguously), the k tail up to the group padded
// with q = 0. Returns s_a.
float quantize_row(const float * x, int k, uint8_t * dst, int stride);

// max_k |x[k]| (qgemm.cpp): a row's quantisation scale times 127.
float row_absmax(const float * x, int k);

// Four bytes as one int32 lane (a k group of u8 or s8), for a broadcast.
inline int32_t load4(const void * p) {
    int32_t v;
    std::memcpy(&v, p, 4);
    return v;
}

// The AVX-512 VNNI k loop of both int8 AVX-512 kernels (qgemm.cpp's qtile_avx512vnni, attention-int8.cpp's dot_tile):
// R rows of a ([kq][mr][4] u8) times one 32-column panel b ([kq][32][4] s8), the int32 sums into t[R][32] (64-byte
// aligned). The sums leave the registers once, into t: with the epilogue's branches reading the accumulators directly,
// GCC 12 kept the 28 of them on the stack inside the k loop (measured: half the kernel's time).
template <int R>
__attribute__((target("avx512f,avx512vnni"), always_inline)) inline void vnni_sums512(int kq, const uint8_t * a, int mr,
                                                                                      const int8_t * b, int32_t * t) {
    __m512i c0[R], c1[R];
#pragma GCC unroll 14
    for (int r = 0; r < R; ++r) c0[r] = c1[r] = _mm512_setzero_si512();
    for (int q = 0; q < kq; ++q, a += mr * 4, b += 4 * k_gemm_nr) {
        const __m512i b0 = _mm512_loadu_si512(b), b1 = _mm512_loadu_si512(b + 64);
#pragma GCC unroll 14
        for (int r = 0; r < R; ++r) {
            const __m512i av = _mm512_set1_epi32(load4(a + 4 * r));
            c0[r]            = _mm512_dpbusd_epi32(c0[r], av, b0);
            c1[r]            = _mm512_dpbusd_epi32(c1[r], av, b1);
        }
    }
#pragma GCC unroll 14
    for (int r = 0; r < R; ++r) {
        _mm512_store_si512(t + r * 32, c0[r]);
        _mm512_store_si512(t + r * 32 + 16, c1[r]);
    }
}

// One row of a finished 32-column tile t (int32 sums, u8 offset included): c[0, ncols) =
// epi(float(t - comp) * (s_w * s_a)); sw0/sw1 and q0/q1 the tile's scales and compensations (columns 0-15,
// 16-31), m0/m1 the column masks (m1 == 0: columns 16-31 absent).
RFDETR_AVX512 inline void dequant_row512(const int32_t * t, float sa, __m512 sw0, __m512 sw1, __m512i q0, __m512i q1,
                                         float * cr, const epilogue & e, __mmask16 m0, __mmask16 m1) {
    const __m512 s  = _mm512_set1_ps(sa);
    const __m512 t0 = _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_sub_epi32(_mm512_loadu_si512(t), q0)), _mm512_mul_ps(sw0, s));
    _mm512_mask_storeu_ps(cr, m0, epi512(t0, cr, e, 0, m0));
    if (m1) {
        const __m512 t1 = _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_sub_epi32(_mm512_loadu_si512(t + 16), q1)), _mm512_mul_ps(sw1, s));
        _mm512_mask_storeu_ps(cr + 16, m1, epi512(t1, cr + 16, e, 16, m1));
    }
}

// The column masks of a 32-column tile with ncols valid columns.
inline __mmask16 cols_mask_lo(int ncols) { return ncols >= 16 ? 0xFFFF : static_cast<__mmask16>((1u << ncols) - 1); }
inline __mmask16 cols_mask_hi(int ncols) {
    return ncols >= 32 ? 0xFFFF : ncols <= 16 ? 0 : static_cast<__mmask16>((1u << (ncols - 16)) - 1);
}

}  // namespace rfdetr::cpu
