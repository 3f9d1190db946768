// The GEMM epilogues on one finished vector of a tile (gemm.h's epi kinds), in AVX2 and AVX-512 forms,
// shared by the float GEMM (gemm.cpp) and the int8 GEMM (qgemm.cpp) so both apply bias, ReLU/GELU and
// LayerScale + residual with the same arithmetic.
#pragma once

#include "engines/cpu/gemm.h"
#include "engines/cpu/simd-math.h"

#include <immintrin.h>

namespace rfdetr::cpu {

// e for the columns from j0 on (its bias and scale advanced): what a 32-column panel's tiles get.
inline epilogue epilogue_from_column(const epilogue & e, int j0) {
    epilogue ep = e;
    ep.bias     = e.bias ? e.bias + j0 : nullptr;
    ep.scale    = e.scale ? e.scale + j0 : nullptr;
    return ep;
}

// Lanes [0, n) set.
inline __m256i mask8(int n) {
    return _mm256_cmpgt_epi32(_mm256_set1_epi32(n), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}

// The epilogue of t for the 8 columns from j; cptr is the output (residual / accumulate); a partial
// vector (full == false) reads only the lanes of m.
inline __m256 epi256(__m256 t, const float * cptr, const epilogue & e, int j, __m256i m, bool full) {
    auto ld = [&](const float * p) { return full ? _mm256_loadu_ps(p) : _mm256_maskload_ps(p, m); };
    switch (e.kind) {
        case epi::store: return _mm256_mul_ps(t, _mm256_set1_ps(e.alpha));
        case epi::accumulate: return _mm256_add_ps(ld(cptr), t);
        case epi::bias: return _mm256_add_ps(t, ld(e.bias + j));
        case epi::bias_relu: return _mm256_max_ps(_mm256_add_ps(t, ld(e.bias + j)), _mm256_setzero_ps());
        case epi::bias_gelu: return simd::gelu256(_mm256_add_ps(t, ld(e.bias + j)));
        case epi::bias_scale_add:
            return _mm256_add_ps(_mm256_mul_ps(_mm256_add_ps(t, ld(e.bias + j)), ld(e.scale + j)), ld(cptr));
        case epi::bias_residual: return _mm256_add_ps(_mm256_add_ps(t, ld(e.bias + j)), ld(cptr));
        case epi::bias_gelu_add: return _mm256_add_ps(simd::gelu256(_mm256_add_ps(t, ld(e.bias + j))), ld(cptr));
    }
    return t;
}

// The AVX-512 form: 16 columns from j, lanes outside m read as zero.
RFDETR_AVX512 inline __m512 epi512(__m512 t, const float * cptr, const epilogue & e, int j, __mmask16 m) {
    switch (e.kind) {
        case epi::store: return _mm512_mul_ps(t, _mm512_set1_ps(e.alpha));
        case epi::accumulate: return _mm512_add_ps(_mm512_maskz_loadu_ps(m, cptr), t);
        case epi::bias: return _mm512_add_ps(t, _mm512_maskz_loadu_ps(m, e.bias + j));
        case epi::bias_relu:
            return _mm512_max_ps(_mm512_add_ps(t, _mm512_maskz_loadu_ps(m, e.bias + j)), _mm512_setzero_ps());
        case epi::bias_gelu: return simd::gelu512(_mm512_add_ps(t, _mm512_maskz_loadu_ps(m, e.bias + j)));
        case epi::bias_scale_add:
            return _mm512_add_ps(_mm512_mul_ps(_mm512_add_ps(t, _mm512_maskz_loadu_ps(m, e.bias + j)),
                                               _mm512_maskz_loadu_ps(m, e.scale + j)),
                                 _mm512_maskz_loadu_ps(m, cptr));
        case epi::bias_residual:
            return _mm512_add_ps(_mm512_add_ps(t, _mm512_maskz_loadu_ps(m, e.bias + j)), _mm512_maskz_loadu_ps(m, cptr));
        case epi::bias_gelu_add:
            return _mm512_add_ps(simd::gelu512(_mm512_add_ps(t, _mm512_maskz_loadu_ps(m, e.bias + j))),
                                 _mm512_maskz_loadu_ps(m, cptr));
    }
    return t;
}

}  // namespace rfdetr::cpu
