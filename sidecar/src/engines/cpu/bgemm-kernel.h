// What the bf16 kernels share (bgemm.cpp's AVX512-BF16 tile and bgemm-amx.cpp's AMX blocks): the size of the
// bf16 row block, the prologue's row rounding, and the store of finished fp32 rows through the epilogue, so
// every kernel turns the same sums into the same floats.
#pragma once

#include "engines/cpu/bgemm.h"
#include "engines/cpu/gemm-epilogue.h"
#include "engines/cpu/kernels.h"
#include "engines/cpu/qgemm-kernel.h"

#include <immintrin.h>

#include <cstddef>
#include <cstdint>

#define RFDETR_AVX512BF16 __attribute__((target("avx512f,avx512bw,avx512vl,avx512bf16")))

namespace rfdetr::cpu {

// A block of bf16 A rows stays in L2 next to the weight panel streaming past it: 192 KB, i.e. 256 rows at
// k = 384, 64 at k = 1536 (as the int8 GEMM's block).
constexpr size_t k_ba_block_bytes = 192 * 1024;

// Row x of A as the GEMM reads it: LayerNormed into `row` first when ln is set (the A pass). Returns the row.
inline const float * b_a_row(const float * x, float * row, int k, const a_layernorm * ln) {
    if (!ln) return x;
    layernorm_row(x, row, k, ln->gamma, ln->beta, ln->eps);
    return row;
}

// dst[0, kpad) = bf16(x[0, k)) (bgemm.h's bf16_round, by vcvtne2ps2bf16), zero past k; kpad a multiple of 32. Each
// run of 32 elements goes chunk elements after the previous one (32: one contiguous row; bgemm-amx's tile layout
// puts them a k step apart).
RFDETR_AVX512BF16 inline void round_row_bf16(const float * x, int k, uint16_t * dst, int kpad, int chunk = 32) {
    for (int kk = 0; kk < kpad; kk += 32) {
        const int       l0 = k - kk, l1 = k - kk - 16;
        const __mmask16 m0 = l0 >= 16 ? 0xFFFF : l0 <= 0 ? 0 : static_cast<__mmask16>((1u << l0) - 1);
        const __mmask16 m1 = l1 >= 16 ? 0xFFFF : l1 <= 0 ? 0 : static_cast<__mmask16>((1u << l1) - 1);
        const __m512bh  v  = _mm512_cvtne2ps_pbh(_mm512_maskz_loadu_ps(m1, x + kk + 16), _mm512_maskz_loadu_ps(m0, x + kk));
        _mm512_storeu_si512(dst + static_cast<size_t>(kk / 32) * chunk, (__m512i)v);
    }
}

// rows rows of fp32 sums t (row stride 32 floats) through the epilogue into c[r * ldc + j], j < ncols <= 32.
RFDETR_AVX512 inline void store_rows_f32(const float * t, int rows, float * c, int ldc, int ncols, const epilogue & e) {
    const __mmask16 m0 = cols_mask_lo(ncols), m1 = cols_mask_hi(ncols);
    for (int r = 0; r < rows; ++r) {
        float * cr = c + static_cast<size_t>(r) * ldc;
        _mm512_mask_storeu_ps(cr, m0, epi512(_mm512_load_ps(t + r * 32), cr, e, 0, m0));
        if (m1) _mm512_mask_storeu_ps(cr + 16, m1, epi512(_mm512_load_ps(t + r * 32 + 16), cr + 16, e, 16, m1));
    }
}

// The same rows through the epilogue (kinds without a c input: store, bias, bias_relu, bias_gelu), rounded to bf16
// (bf16_round, by vcvtneps2bf16) into c[r * ldc + j]: the A rows of the next GEMM, half the bytes of fp32.
RFDETR_AVX512BF16 inline void store_rows_bf16(const float * t, int rows, uint16_t * c, int ldc, int ncols,
                                              const epilogue & e) {
    const __mmask16 m0 = cols_mask_lo(ncols), m1 = cols_mask_hi(ncols);
    for (int r = 0; r < rows; ++r) {
        uint16_t *   cr = c + static_cast<size_t>(r) * ldc;
        const __m512 v0 = epi512(_mm512_load_ps(t + r * 32), nullptr, e, 0, m0);
        _mm256_mask_storeu_epi16(cr, m0, (__m256i)_mm512_cvtneps_pbh(v0));
        if (m1) {
            const __m512 v1 = epi512(_mm512_load_ps(t + r * 32 + 16), nullptr, e, 16, m1);
            _mm256_mask_storeu_epi16(cr + 16, m1, (__m256i)_mm512_cvtneps_pbh(v1));
        }
    }
}

}  // namespace rfdetr::cpu
