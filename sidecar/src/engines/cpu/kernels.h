// The CPU engine's elementwise, normalisation, sampling and selection kernels (the GEMM is gemm.h, the
// attention attention.h). Each has a plain-loop reference in kernels-ref.cpp (namespace rfdetr::ref)
// that the tests compare it with on odd sizes. Layout conventions: row-major; a "linear" weight is torch's
// [out, in]; images and feature maps are pixel-major [H*W, C] unless a name says chw.
#pragma once

#include <cstdint>
#include <cstddef>

namespace rfdetr::cpu {

// y[r,:] = LN(x[r,:]) * gamma + beta over `dim` values, rows r in [0, rows). x and y may alias.
void layernorm(const float * x, int ldx, float * y, int ldy, int rows, int dim, const float * gamma,
               const float * beta, float eps);
// One row of layernorm (the arithmetic layernorm uses): y = LN(x) * gamma + beta over dim values.
void layernorm_row(const float * x, float * y, int dim, const float * gamma, const float * beta, float eps);
// layernorm_row on rows x[i] -> y[i], i in [0, rows), up to 8 at a time (the same bits as one by one, faster).
void layernorm_rows(const float * const * x, float * const * y, int rows, int dim, const float * gamma,
                    const float * beta, float eps);
// Tests: the LayerNorm's normalising pass in AVX-512 (on) or AVX2 (off; the default follows the CPU). Returns false
// (and changes nothing) when on is asked of a CPU without AVX-512.
bool layernorm_select_avx512(bool on);

// x[i] = silu(x[i]) over a [rows, n] block with leading dimension ld. (Bias, ReLU and the exact-erf GELU
// are GEMM epilogues: gemm.h.)
void silu(float * x, int ld, int rows, int n);

// Vectorised expf / erff, accurate to a few ulp (tests bound them against libm in double).
void exp_inplace(float * x, size_t n);
void erf_inplace(float * x, size_t n);

// Row softmax over `cols`, rows of stride ld, in place (max subtracted first).
void softmax_rows(float * x, int ld, int rows, int cols);

// Bilinear sample of a pixel-major value map [h*w, ld] (channels c0..c0+nc) at normalised location
// (lx, ly) in [0,1] units, as torch grid_sample(bilinear, zeros padding, align_corners=False) sees
// grid = 2*loc - 1: out-of-range corners contribute 0 each. out[j] += weight * sample[j].
void bilinear_sample_accumulate(const float * value, int ld, int h, int w, float lx, float ly, float weight,
                                int nc, float * out);

// F.interpolate(mode="bicubic", align_corners=False, antialias=True) of a pixel-major grid
// [in_h*in_w, c] to [out_h*out_w, c]: width pass then height pass, f32 weights (Keys a = -0.5,
// truncated taps renormalised), fmaf accumulation.
void resize_bicubic_aa(const float * src, int in_h, int in_w, int c, float * dst, int out_h, int out_w,
                       float * scratch /* in_h*out_w*c */);

// im2col for a 3x3, pad 1, stride 1 convolution of a pixel-major map [h*w, ld] with c channels into
// cols [h*w, c*9] (column ci*9 + ky*3 + kx, torch's [cout, cin, 3, 3] weight order). Rows [y0, y1).
void im2col_3x3(const float * x, int ld, int h, int w, int c, float * cols, int y0, int y1);

// Indices of the k largest scores, sorted descending; equal scores by ascending index.
void topk(const float * scores, int n, int k, int32_t * idx, int32_t * scratch /* n */);

}  // namespace rfdetr::cpu

namespace rfdetr::cpu {
struct epilogue;  // gemm.h
}

namespace rfdetr::ref {

// Plain loops, double accumulation where it matters. Same contracts as rfdetr::cpu where both exist.
// gemm: C[m,n] = alpha * A[m,k] * op(B) + beta * C, op(B) = B^T when b_is_nk (B stored [n,k]).
void gemm(int m, int n, int k, float alpha, const float * a, int lda, const float * b, int ldb, bool b_is_nk,
          float beta, float * c, int ldc);
void layernorm(const float * x, int ldx, float * y, int ldy, int rows, int dim, const float * gamma,
               const float * beta, float eps);
float gelu(float x);
// gemm.h's epilogue in scalar float on one finished product t of column j, given the output's current value c
// (the reduced-precision GEMMs' plain-loop forms, qgemm_ref and bgemm_ref, share it).
float epilogue(const cpu::epilogue & e, int j, float t, float c);
void softmax_rows(float * x, int ld, int rows, int cols);
// o = softmax(scale * q k^T) v for one head (attention.h's contract).
void attention_head(const float * q, int ldq, const float * k, int ldk, const float * v, int ldv, float * o,
                    int ldo, int nq, int nk, int d, float scale);
// grid_sample on a channels-first map [nc, h, w] at grid coordinate (gx, gy) in [-1, 1] terms.
void grid_sample_bilinear(const float * chw, int nc, int h, int w, float gx, float gy, float * out);
void resize_bicubic_aa(const float * src, int in_h, int in_w, int c, float * dst, int out_h, int out_w);
// Direct 3x3 pad-1 convolution, pixel-major in and out: y[p, co] = sum w[co, ci, ky, kx] x[p', ci].
void conv3x3(const float * x, int h, int w, int cin, const float * weight, int cout, float * y);
void topk(const float * scores, int n, int k, int32_t * idx);

}  // namespace rfdetr::ref
