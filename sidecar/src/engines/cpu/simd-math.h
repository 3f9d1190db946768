// Vectorised float math shared by the kernels and the GEMM epilogues: horizontal sum/max, expf, the
// piecewise-polynomial erf, GELU and SiLU, each in an AVX2 (baseline) and an AVX-512 form that compute
// the same operations lane by lane (the AVX-512 forms are only called behind a runtime CPU check).
#pragma once

#include <immintrin.h>

#include <cstdint>

namespace rfdetr::cpu::simd {

inline float hsum(__m256 v) {
    __m128 lo = _mm256_castps256_ps128(v);
    __m128 hi = _mm256_extractf128_ps(v, 1);
    lo        = _mm_add_ps(lo, hi);
    lo        = _mm_add_ps(lo, _mm_movehl_ps(lo, lo));
    lo        = _mm_add_ss(lo, _mm_movehdup_ps(lo));
    return _mm_cvtss_f32(lo);
}

inline float hmax(__m256 v) {
    __m128 lo = _mm256_castps256_ps128(v);
    __m128 hi = _mm256_extractf128_ps(v, 1);
    lo        = _mm_max_ps(lo, hi);
    lo        = _mm_max_ps(lo, _mm_movehl_ps(lo, lo));
    lo        = _mm_max_ss(lo, _mm_movehdup_ps(lo));
    return _mm_cvtss_f32(lo);
}

// Cephes-style expf: x = n*ln2 + r with a two-constant ln2, degree-6 polynomial for e^r, 2^n via the
// exponent bits. Inputs are clamped to [-87.3, 88.37] (results below 1.2e-38 do not matter here).
inline __m256 exp256(__m256 x) {
    x         = _mm256_min_ps(x, _mm256_set1_ps(88.3762626647949f));
    x         = _mm256_max_ps(x, _mm256_set1_ps(-87.3f));
    __m256 fx = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(1.44269504088896341f)),
                                _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    x         = _mm256_fnmadd_ps(fx, _mm256_set1_ps(0.693359375f), x);
    x         = _mm256_fnmadd_ps(fx, _mm256_set1_ps(-2.12194440e-4f), x);
    __m256 y  = _mm256_set1_ps(1.9875691500E-4f);
    y         = _mm256_fmadd_ps(y, x, _mm256_set1_ps(1.3981999507E-3f));
    y         = _mm256_fmadd_ps(y, x, _mm256_set1_ps(8.3334519073E-3f));
    y         = _mm256_fmadd_ps(y, x, _mm256_set1_ps(4.1665795894E-2f));
    y         = _mm256_fmadd_ps(y, x, _mm256_set1_ps(1.6666665459E-1f));
    y         = _mm256_fmadd_ps(y, x, _mm256_set1_ps(5.0000001201E-1f));
    y         = _mm256_fmadd_ps(y, _mm256_mul_ps(x, x), _mm256_add_ps(x, _mm256_set1_ps(1.0f)));
    __m256i e = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(fx), _mm256_set1_epi32(127)), 23);
    return _mm256_mul_ps(y, _mm256_castsi256_ps(e));
}

// erf, piecewise: |x| clamped to [0, 4) falls in one of 8 intervals of width 0.5 (erf(4) = 1 - 1.5e-8 is
// 1.0f); on each, a degree-6 polynomial in t = |x| - centre (least squares on 200 Chebyshev nodes of
// |t| <= 0.25, coefficients rounded to float) whose 8 per-interval coefficients sit in one register and
// are picked with one permute. |error| < 9e-8 everywhere against libm (measured in double over [0, 4.5]
// in steps of 1e-5; the tests bound it), and no division or exp: a third of the previous erf's
// (Taylor + Numerical Recipes' erfc) instructions.
alignas(64) inline constexpr float k_erf_poly[7][8] = {
    {2.763263881e-01f, 7.111556530e-01f, 9.229001403e-01f, 9.866716862e-01f, 9.985373020e-01f, 9.998993874e-01f, 9.999957085e-01f, 9.999998808e-01f},
    {1.060013652e+00f, 6.429315209e-01f, 2.365212291e-01f, 5.277483538e-02f, 7.142299786e-03f, 5.862942780e-04f, 2.919364670e-05f, 8.818866490e-07f},
    {-2.650029659e-01f, -4.821981490e-01f, -2.956517339e-01f, -9.235620499e-02f, -1.607015729e-02f, -1.612267457e-03f, -9.486933413e-05f, -3.306070994e-06f},
    {-3.091164827e-01f, 2.672721818e-02f, 1.675230861e-01f, 9.017766267e-02f, 2.172697894e-02f, 2.758207032e-03f, 1.952192833e-04f, 7.911728062e-06f},
    {1.269345582e-01f, 1.506756246e-01f, -6.132035051e-03f, -4.810552299e-02f, -1.908825710e-02f, -3.257710487e-03f, -2.861694375e-04f, -1.378540946e-05f},
    {7.830777019e-02f, -5.126086250e-02f, -4.677693173e-02f, 5.969540216e-03f, 1.058114227e-02f, 2.825833391e-03f, 3.326159786e-04f, 2.020526335e-05f},
    {-3.934079409e-02f, -2.658282965e-02f, 2.059773728e-02f, 9.049494751e-03f, -2.779565053e-03f, -1.667850534e-03f, -2.737584291e-04f, -2.069242146e-05f},
};

inline __m256 erf256(__m256 x) {
    const __m256  sign = _mm256_and_ps(x, _mm256_set1_ps(-0.0f));
    const __m256  z    = _mm256_min_ps(_mm256_andnot_ps(_mm256_set1_ps(-0.0f), x), _mm256_set1_ps(3.99999976f));
    const __m256i idx  = _mm256_cvttps_epi32(_mm256_add_ps(z, z));
    const __m256  t    = _mm256_sub_ps(z, _mm256_fmadd_ps(_mm256_cvtepi32_ps(idx), _mm256_set1_ps(0.5f),
                                                          _mm256_set1_ps(0.25f)));
    __m256 p = _mm256_permutevar8x32_ps(_mm256_load_ps(k_erf_poly[6]), idx);
    for (int k = 5; k >= 0; --k) {
        p = _mm256_fmadd_ps(p, t, _mm256_permutevar8x32_ps(_mm256_load_ps(k_erf_poly[k]), idx));
    }
    return _mm256_or_ps(p, sign);
}

inline __m256 gelu256(__m256 x) {
    const __m256 e = erf256(_mm256_mul_ps(x, _mm256_set1_ps(0.70710678118654752f)));
    return _mm256_mul_ps(_mm256_mul_ps(x, _mm256_set1_ps(0.5f)), _mm256_add_ps(_mm256_set1_ps(1.0f), e));
}

inline __m256 silu256(__m256 x) {
    const __m256 e = exp256(_mm256_sub_ps(_mm256_setzero_ps(), x));
    return _mm256_div_ps(x, _mm256_add_ps(_mm256_set1_ps(1.0f), e));
}

// AVX-512 forms: the same operation sequence as the 256-bit ones, so results agree bit for bit.
#define RFDETR_AVX512 __attribute__((target("avx512f")))

// exp512's core on a clamped x: n = round(x log2 e) into *fx, and e^r for r = x - n ln2 (two-constant ln2, degree-6
// polynomial); the caller scales by 2^n.
RFDETR_AVX512 inline __m512 exp512_reduced(__m512 x, __m512 * fx_out) {
    __m512 fx = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(1.44269504088896341f)),
                                     _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    x         = _mm512_fnmadd_ps(fx, _mm512_set1_ps(0.693359375f), x);
    x         = _mm512_fnmadd_ps(fx, _mm512_set1_ps(-2.12194440e-4f), x);
    __m512 y  = _mm512_set1_ps(1.9875691500E-4f);
    y         = _mm512_fmadd_ps(y, x, _mm512_set1_ps(1.3981999507E-3f));
    y         = _mm512_fmadd_ps(y, x, _mm512_set1_ps(8.3334519073E-3f));
    y         = _mm512_fmadd_ps(y, x, _mm512_set1_ps(4.1665795894E-2f));
    y         = _mm512_fmadd_ps(y, x, _mm512_set1_ps(1.6666665459E-1f));
    y         = _mm512_fmadd_ps(y, x, _mm512_set1_ps(5.0000001201E-1f));
    y         = _mm512_fmadd_ps(y, _mm512_mul_ps(x, x), _mm512_add_ps(x, _mm512_set1_ps(1.0f)));
    *fx_out = fx;
    return y;
}

RFDETR_AVX512 inline __m512 exp512(__m512 x) {
    x         = _mm512_min_ps(x, _mm512_set1_ps(88.3762626647949f));
    x         = _mm512_max_ps(x, _mm512_set1_ps(-87.3f));
    __m512 fx;
    __m512 y  = exp512_reduced(x, &fx);
    __m512i e = _mm512_slli_epi32(_mm512_add_epi32(_mm512_cvtps_epi32(fx), _mm512_set1_epi32(127)), 23);
    return _mm512_mul_ps(y, _mm512_castsi512_ps(e));
}

// exp512 for x <= 0 (a softmax's s - max), bit for bit the same: the upper clamp cannot act, and for
// n = round(x log2 e) in [-126, 0] the scale 2^n is a normal float, so y * 2^n by `vscalefps` is the same rounded
// product as the multiply by the float built from n's bits (also where it is denormal). 13 operations against 17.
RFDETR_AVX512 inline __m512 exp512_nonpositive(__m512 x) {
    x         = _mm512_max_ps(x, _mm512_set1_ps(-87.3f));
    __m512 fx;
    __m512 y  = exp512_reduced(x, &fx);
    return _mm512_scalef_ps(y, fx);
}

// 2^t for t <= 0, for softmax weights that end as bf16 or u8: t = n + f (n = round(t), |f| <= 1/2), 2^f by the
// degree-4 polynomial through the 5 Chebyshev nodes of [-1/2, 1/2] (relative error < 3.6e-6: 1/1000 of a bf16 ulp,
// 1/1000 of a u8 step at 1), 2^n by vscalef (0 below 2^-149, no clamp needed). 8 operations against
// exp512_nonpositive's 13 (its range reduction is exact to float; these consumers round to 8 bits).
RFDETR_AVX512 inline __m512 exp2_nonpositive512(__m512 t) {
    const __m512 n = _mm512_roundscale_ps(t, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    const __m512 f = _mm512_sub_ps(t, n);
    __m512       y = _mm512_set1_ps(9.666368365e-03f);
    y              = _mm512_fmadd_ps(y, f, _mm512_set1_ps(5.592197552e-02f));
    y              = _mm512_fmadd_ps(y, f, _mm512_set1_ps(2.402234972e-01f));
    y              = _mm512_fmadd_ps(y, f, _mm512_set1_ps(6.931210160e-01f));
    y              = _mm512_fmadd_ps(y, f, _mm512_set1_ps(1.0f));
    return _mm512_scalef_ps(y, n);
}

RFDETR_AVX512 inline __m512 erf512(__m512 x) {
    const __m512  sign = _mm512_castsi512_ps(_mm512_and_si512(_mm512_castps_si512(x), _mm512_set1_epi32(INT32_MIN)));
    const __m512  z    = _mm512_min_ps(_mm512_abs_ps(x), _mm512_set1_ps(3.99999976f));
    const __m512i idx  = _mm512_cvttps_epi32(_mm512_add_ps(z, z));
    const __m512  t    = _mm512_sub_ps(z, _mm512_fmadd_ps(_mm512_cvtepi32_ps(idx), _mm512_set1_ps(0.5f),
                                                          _mm512_set1_ps(0.25f)));
    __m512 p = _mm512_permutexvar_ps(idx, _mm512_zextps256_ps512(_mm256_load_ps(k_erf_poly[6])));
    for (int k = 5; k >= 0; --k) {
        p = _mm512_fmadd_ps(p, t, _mm512_permutexvar_ps(idx, _mm512_zextps256_ps512(_mm256_load_ps(k_erf_poly[k]))));
    }
    return _mm512_castsi512_ps(_mm512_or_si512(_mm512_castps_si512(p), _mm512_castps_si512(sign)));
}

RFDETR_AVX512 inline __m512 gelu512(__m512 x) {
    const __m512 e = erf512(_mm512_mul_ps(x, _mm512_set1_ps(0.70710678118654752f)));
    return _mm512_mul_ps(_mm512_mul_ps(x, _mm512_set1_ps(0.5f)), _mm512_add_ps(_mm512_set1_ps(1.0f), e));
}

}  // namespace rfdetr::cpu::simd
