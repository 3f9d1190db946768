// The AVX-512F kernels: 16 outputs per instruction, each lane its own ascending fmaf chain. The width pass
// gathers one 4-byte word per output pixel and splits it into R, G, B (the fourth byte is ignored).
#include "preprocess/kernels.h"

// GCC 12's avx512fintrin.h initialises _mm512_undefined_ps() from itself, which -Wmaybe-uninitialized flags
// inside every inlined conversion (a header false positive, GCC bug 105593).
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>

#define RFDETR_AVX512 __attribute__((target("avx512f")))

namespace rfdetr {

namespace {

RFDETR_AVX512 void width_row_avx512(const width_plan & p, const uint8_t * row, float * r, float * g, float * b) {
    const __m512i byte   = _mm512_set1_epi32(0xff);
    const int     blocks = p.out_padded / k_lanes;
    for (int bl = 0; bl < blocks; bl++) {
        const int32_t * off = p.offset.data() + p.base[bl];
        const float *   wt  = p.weight.data() + p.base[bl];
        __m512          ar = _mm512_setzero_ps(), ag = _mm512_setzero_ps(), ab = _mm512_setzero_ps();
        for (int j = 0; j < p.taps[bl]; j++) {
            const __m512i px = _mm512_i32gather_epi32(_mm512_loadu_si512(off + j * k_lanes), row, 1);
            const __m512  w  = _mm512_loadu_ps(wt + j * k_lanes);
            ar = _mm512_fmadd_ps(_mm512_cvtepi32_ps(_mm512_and_si512(px, byte)), w, ar);
            ag = _mm512_fmadd_ps(_mm512_cvtepi32_ps(_mm512_and_si512(_mm512_srli_epi32(px, 8), byte)), w, ag);
            ab = _mm512_fmadd_ps(_mm512_cvtepi32_ps(_mm512_and_si512(_mm512_srli_epi32(px, 16), byte)), w, ab);
        }
        const int x = bl * k_lanes;
        _mm512_storeu_ps(r + x, ar);
        _mm512_storeu_ps(g + x, ag);
        _mm512_storeu_ps(b + x, ab);
    }
}

RFDETR_AVX512 void height_row_avx512(const float * src, size_t stride, int n, const float * w, int out_size,
                                     float mean, float std, float * out) {
    const __m512 inv255 = _mm512_set1_ps(1.0f / 255.0f);
    const __m512 vmean  = _mm512_set1_ps(mean);
    const __m512 vstd   = _mm512_set1_ps(std);
    // Rows are padded to a multiple of 16, so the last block's loads stay inside; its store is masked.
    for (int x = 0; x < out_size; x += 16) {
        __m512 acc = _mm512_setzero_ps();
        for (int j = 0; j < n; j++) {
            acc = _mm512_fmadd_ps(_mm512_loadu_ps(src + j * stride + x), _mm512_set1_ps(w[j]), acc);
        }
        const __m512    v    = _mm512_div_ps(_mm512_sub_ps(_mm512_mul_ps(acc, inv255), vmean), vstd);
        const int       left = out_size - x;
        const __mmask16 m    = left >= 16 ? static_cast<__mmask16>(0xffff) : static_cast<__mmask16>((1u << left) - 1);
        _mm512_mask_storeu_ps(out + x, m, v);
    }
}

}  // namespace

const kernel_table k_kernels_avx512 = {width_row_avx512, height_row_avx512};

}  // namespace rfdetr

#pragma GCC diagnostic pop
