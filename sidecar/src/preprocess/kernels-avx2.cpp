// The AVX2+FMA kernels: 8 outputs per instruction, each lane its own ascending fmaf chain. The width pass
// gathers one 4-byte word per output pixel and splits it into R, G, B (the fourth byte is ignored).
#include "preprocess/kernels.h"

#include <immintrin.h>

#define RFDETR_AVX2 __attribute__((target("avx2,fma")))

namespace rfdetr {

namespace {

RFDETR_AVX2 void width_row_avx2(const width_plan & p, const uint8_t * row, float * r, float * g, float * b) {
    const __m256i byte   = _mm256_set1_epi32(0xff);
    const int     blocks = p.out_padded / k_lanes;
    const int *   base   = reinterpret_cast<const int *>(row);
    for (int bl = 0; bl < blocks; bl++) {
        const int32_t * off = p.offset.data() + p.base[bl];
        const float *   wt  = p.weight.data() + p.base[bl];
        for (int h = 0; h < k_lanes; h += 8) {
            __m256 ar = _mm256_setzero_ps(), ag = _mm256_setzero_ps(), ab = _mm256_setzero_ps();
            for (int j = 0; j < p.taps[bl]; j++) {
                const __m256i idx = _mm256_loadu_si256(reinterpret_cast<const __m256i *>(off + j * k_lanes + h));
                const __m256i px  = _mm256_i32gather_epi32(base, idx, 1);
                const __m256  w   = _mm256_loadu_ps(wt + j * k_lanes + h);
                ar = _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_and_si256(px, byte)), w, ar);
                ag = _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_and_si256(_mm256_srli_epi32(px, 8), byte)), w, ag);
                ab = _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_and_si256(_mm256_srli_epi32(px, 16), byte)), w, ab);
            }
            const int x = bl * k_lanes + h;
            _mm256_storeu_ps(r + x, ar);
            _mm256_storeu_ps(g + x, ag);
            _mm256_storeu_ps(b + x, ab);
        }
    }
}

RFDETR_AVX2 void height_row_avx2(const float * src, size_t stride, int n, const float * w, int out_size, float mean,
                                 float std, float * out) {
    const __m256 inv255 = _mm256_set1_ps(1.0f / 255.0f);
    const __m256 vmean  = _mm256_set1_ps(mean);
    const __m256 vstd   = _mm256_set1_ps(std);
    int          x      = 0;
    for (; x + 8 <= out_size; x += 8) {
        __m256 acc = _mm256_setzero_ps();
        for (int j = 0; j < n; j++) {
            acc = _mm256_fmadd_ps(_mm256_loadu_ps(src + j * stride + x), _mm256_set1_ps(w[j]), acc);
        }
        const __m256 v = _mm256_div_ps(_mm256_sub_ps(_mm256_mul_ps(acc, inv255), vmean), vstd);
        _mm256_storeu_ps(out + x, v);
    }
    for (; x < out_size; x++) {
        float acc = 0.0f;
        for (int j = 0; j < n; j++) {
            acc = __builtin_fmaf(src[j * stride + x], w[j], acc);
        }
        out[x] = normalise_value(acc, mean, std);
    }
}

}  // namespace

const kernel_table k_kernels_avx2 = {width_row_avx2, nullptr, nullptr, height_row_avx2};

}  // namespace rfdetr
