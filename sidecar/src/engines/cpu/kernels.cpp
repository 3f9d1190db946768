#include "engines/cpu/kernels.h"

#include "engines/cpu/simd-math.h"

#include <immintrin.h>

#include <algorithm>
#include <cmath>

namespace rfdetr::cpu {

using namespace simd;

namespace {

inline __m256 load_tail(const float * p, int n) {
    alignas(32) float buf[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    for (int i = 0; i < n; ++i) buf[i] = p[i];
    return _mm256_load_ps(buf);
}

inline void store_tail(float * p, __m256 v, int n) {
    alignas(32) float buf[8];
    _mm256_store_ps(buf, v);
    for (int i = 0; i < n; ++i) p[i] = buf[i];
}

// Applies f to x + bias over a [rows, n] block.
template <class F> void rows_map(float * x, int ld, int rows, int n, const float * bias, F f) {
    for (int r = 0; r < rows; ++r) {
        float * row = x + static_cast<size_t>(r) * ld;
        int     j   = 0;
        for (; j + 8 <= n; j += 8) {
            __m256 v = _mm256_loadu_ps(row + j);
            if (bias) v = _mm256_add_ps(v, _mm256_loadu_ps(bias + j));
            _mm256_storeu_ps(row + j, f(v));
        }
        if (j < n) {
            __m256 v = load_tail(row + j, n - j);
            if (bias) v = _mm256_add_ps(v, load_tail(bias + j, n - j));
            store_tail(row + j, f(v), n - j);
        }
    }
}

}  // namespace

void exp_inplace(float * x, size_t n) {
    size_t i = 0;
    for (; i + 8 <= n; i += 8) _mm256_storeu_ps(x + i, exp256(_mm256_loadu_ps(x + i)));
    if (i < n) store_tail(x + i, exp256(load_tail(x + i, static_cast<int>(n - i))), static_cast<int>(n - i));
}

void erf_inplace(float * x, size_t n) {
    size_t i = 0;
    for (; i + 8 <= n; i += 8) _mm256_storeu_ps(x + i, erf256(_mm256_loadu_ps(x + i)));
    if (i < n) store_tail(x + i, erf256(load_tail(x + i, static_cast<int>(n - i))), static_cast<int>(n - i));
}

void silu(float * x, int ld, int rows, int n) {
    rows_map(x, ld, rows, n, nullptr, [](__m256 v) { return silu256(v); });
}

namespace {

// LayerNorm of G rows at once with layernorm_row's arithmetic, row for row: each row's sum and sum of squares
// is one 8-lane chain in the same order, so the bits are the same; the G chains are independent, so they
// overlap instead of each waiting on its own add latency (one row's 48 dependent adds at dim 384 were most of its
// time). The normalising pass is elementwise: 16 lanes where the CPU has AVX-512, the same operations per value.
template <int G> inline void ln_stats(const float * const * x, int dim, float eps, float * mean, float * rstd) {
    __m256 s[G];
#pragma GCC unroll 8
    for (int g = 0; g < G; ++g) s[g] = _mm256_setzero_ps();
    int j = 0;
    for (; j + 8 <= dim; j += 8) {
#pragma GCC unroll 8
        for (int g = 0; g < G; ++g) s[g] = _mm256_add_ps(s[g], _mm256_loadu_ps(x[g] + j));
    }
    const int j8 = j;
    for (int g = 0; g < G; ++g) {
        float sum = hsum(s[g]);
        for (int t = j8; t < dim; ++t) sum += x[g][t];
        mean[g] = sum / static_cast<float>(dim);
    }
    __m256 vm[G], q[G];
#pragma GCC unroll 8
    for (int g = 0; g < G; ++g) {
        vm[g] = _mm256_set1_ps(mean[g]);
        q[g]  = _mm256_setzero_ps();
    }
    for (j = 0; j + 8 <= dim; j += 8) {
#pragma GCC unroll 8
        for (int g = 0; g < G; ++g) {
            const __m256 d = _mm256_sub_ps(_mm256_loadu_ps(x[g] + j), vm[g]);
            q[g]           = _mm256_fmadd_ps(d, d, q[g]);
        }
    }
    for (int g = 0; g < G; ++g) {
        float sq = hsum(q[g]);
        for (int t = j8; t < dim; ++t) sq += (x[g][t] - mean[g]) * (x[g][t] - mean[g]);
        rstd[g] = 1.0f / std::sqrt(sq / static_cast<float>(dim) + eps);
    }
}

// y = (x - mean) * rstd * gamma + beta: fused over the first dim/8*8 values, unfused over the tail (layernorm_row's
// split).
inline int ln_tail(const float * x, float * y, int j, int dim, float mean, float rstd, const float * gamma,
                   const float * beta) {
    for (; j < dim; ++j) y[j] = (x[j] - mean) * rstd * gamma[j] + beta[j];
    return j;
}

void ln_apply256(const float * x, float * y, int dim, float mean, float rstd, const float * gamma, const float * beta) {
    const __m256 vm = _mm256_set1_ps(mean), vr = _mm256_set1_ps(rstd);
    int          j  = 0;
    for (; j + 8 <= dim; j += 8) {
        const __m256 d = _mm256_mul_ps(_mm256_sub_ps(_mm256_loadu_ps(x + j), vm), vr);
        _mm256_storeu_ps(y + j, _mm256_fmadd_ps(d, _mm256_loadu_ps(gamma + j), _mm256_loadu_ps(beta + j)));
    }
    ln_tail(x, y, j, dim, mean, rstd, gamma, beta);
}

RFDETR_AVX512 void ln_apply512(const float * x, float * y, int dim, float mean, float rstd, const float * gamma,
                               const float * beta) {
    const __m512 vm = _mm512_set1_ps(mean), vr = _mm512_set1_ps(rstd);
    const int    d8 = dim / 8 * 8;
    int          j  = 0;
    for (; j + 16 <= d8; j += 16) {
        const __m512 d = _mm512_mul_ps(_mm512_sub_ps(_mm512_loadu_ps(x + j), vm), vr);
        _mm512_storeu_ps(y + j, _mm512_fmadd_ps(d, _mm512_loadu_ps(gamma + j), _mm512_loadu_ps(beta + j)));
    }
    if (j < d8) {  // one group of 8 left
        const __mmask16 m = 0xFF;
        const __m512    d = _mm512_mul_ps(_mm512_sub_ps(_mm512_maskz_loadu_ps(m, x + j), vm), vr);
        _mm512_mask_storeu_ps(y + j, m,
                              _mm512_fmadd_ps(d, _mm512_maskz_loadu_ps(m, gamma + j), _mm512_maskz_loadu_ps(m, beta + j)));
        j += 8;
    }
    ln_tail(x, y, j, dim, mean, rstd, gamma, beta);
}

using ln_apply_fn = void (*)(const float *, float *, int, float, float, const float *, const float *);

ln_apply_fn ln_apply_pick() {
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx512f") ? &ln_apply512 : &ln_apply256;
}

ln_apply_fn & ln_apply() {
    static ln_apply_fn f = ln_apply_pick();
    return f;
}

template <int G>
void ln_group(const float * const * x, float * const * y, int dim, const float * gamma, const float * beta, float eps) {
    float             mean[G], rstd[G];
    const ln_apply_fn apply = ln_apply();
    ln_stats<G>(x, dim, eps, mean, rstd);
    for (int g = 0; g < G; ++g) apply(x[g], y[g], dim, mean[g], rstd[g], gamma, beta);
}

}  // namespace

void layernorm_row(const float * xr, float * yr, int dim, const float * gamma, const float * beta, float eps) {
    ln_group<1>(&xr, &yr, dim, gamma, beta, eps);
}

bool layernorm_select_avx512(bool on) {
    if (on && !__builtin_cpu_supports("avx512f")) return false;
    ln_apply() = on ? &ln_apply512 : &ln_apply256;
    return true;
}

void layernorm_rows(const float * const * x, float * const * y, int rows, int dim, const float * gamma,
                    const float * beta, float eps) {
    int r = 0;
    for (; r + 8 <= rows; r += 8) ln_group<8>(x + r, y + r, dim, gamma, beta, eps);
    if (r + 4 <= rows) {
        ln_group<4>(x + r, y + r, dim, gamma, beta, eps);
        r += 4;
    }
    if (r + 2 <= rows) {
        ln_group<2>(x + r, y + r, dim, gamma, beta, eps);
        r += 2;
    }
    if (r < rows) ln_group<1>(x + r, y + r, dim, gamma, beta, eps);
}

void layernorm(const float * x, int ldx, float * y, int ldy, int rows, int dim, const float * gamma,
               const float * beta, float eps) {
    for (int r0 = 0; r0 < rows; r0 += 8) {
        const int     n = std::min(8, rows - r0);
        const float * xs[8];
        float *       ys[8];
        for (int i = 0; i < n; ++i) {
            xs[i] = x + static_cast<size_t>(r0 + i) * ldx;
            ys[i] = y + static_cast<size_t>(r0 + i) * ldy;
        }
        layernorm_rows(xs, ys, n, dim, gamma, beta, eps);
    }
}

void softmax_rows(float * x, int ld, int rows, int cols) {
    for (int r = 0; r < rows; ++r) {
        float * row = x + static_cast<size_t>(r) * ld;
        __m256  vm  = _mm256_set1_ps(-INFINITY);
        int     j   = 0;
        for (; j + 8 <= cols; j += 8) vm = _mm256_max_ps(vm, _mm256_loadu_ps(row + j));
        float mx = hmax(vm);
        for (; j < cols; ++j) mx = std::max(mx, row[j]);
        const __m256 vmx = _mm256_set1_ps(mx);
        __m256       vs  = _mm256_setzero_ps();
        for (j = 0; j + 8 <= cols; j += 8) {
            const __m256 e = exp256(_mm256_sub_ps(_mm256_loadu_ps(row + j), vmx));
            _mm256_storeu_ps(row + j, e);
            vs = _mm256_add_ps(vs, e);
        }
        float sum = hsum(vs);
        if (j < cols) {
            const int    t = cols - j;
            const __m256 e = exp256(_mm256_sub_ps(load_tail(row + j, t), vmx));
            alignas(32) float buf[8];
            _mm256_store_ps(buf, e);
            for (int i = 0; i < t; ++i) {
                row[j + i] = buf[i];
                sum += buf[i];
            }
        }
        const float  inv = 1.0f / sum;
        const __m256 vi  = _mm256_set1_ps(inv);
        for (j = 0; j + 8 <= cols; j += 8) _mm256_storeu_ps(row + j, _mm256_mul_ps(_mm256_loadu_ps(row + j), vi));
        for (; j < cols; ++j) row[j] *= inv;
    }
}

void bilinear_sample_accumulate(const float * value, int ld, int h, int w, float lx, float ly, float weight,
                                int nc, float * out) {
    // The two float32 roundings of the reference: grid = 2*loc - 1, then pixel = (grid + 1) * (size/2) - 0.5.
    const float gx = 2.0f * lx - 1.0f;
    const float gy = 2.0f * ly - 1.0f;
    const float ix = (gx + 1.0f) * (static_cast<float>(w) * 0.5f) - 0.5f;
    const float iy = (gy + 1.0f) * (static_cast<float>(h) * 0.5f) - 0.5f;
    const float fx = std::floor(ix), fy = std::floor(iy);
    const float tw = ix - fx, te = 1.0f - tw;  // weights toward west/east
    const float tn = iy - fy, ts = 1.0f - tn;
    const int   x0 = static_cast<int>(fx), y0 = static_cast<int>(fy);
    const float cw[4] = {ts * te, ts * tw, tn * te, tn * tw};  // nw, ne, sw, se
    const int   cx[4] = {x0, x0 + 1, x0, x0 + 1};
    const int   cy[4] = {y0, y0, y0 + 1, y0 + 1};
    const float * src[4];
    for (int c = 0; c < 4; ++c) {
        const bool inside = cx[c] >= 0 && cx[c] < w && cy[c] >= 0 && cy[c] < h;
        src[c] = inside ? value + (static_cast<size_t>(cy[c]) * w + cx[c]) * ld : nullptr;
    }
    // The reference's order: the 4-corner sum first, then times the attention weight, then accumulated.
    for (int j = 0; j < nc; ++j) {
        float s = 0.0f;
        for (int c = 0; c < 4; ++c) {
            if (src[c]) s += src[c][j] * cw[c];
        }
        out[j] += weight * s;
    }
}

namespace {

float cubic_aa(float x) {
    // torch's aa_filter for bicubic: Keys a = -0.5, evaluated in double and returned as float.
    const double a = -0.5;
    const double t = std::fabs(static_cast<double>(x));
    if (t < 1.0) return static_cast<float>(((a + 2.0) * t - (a + 3.0)) * t * t + 1.0);
    if (t < 2.0) return static_cast<float>((((t - 5.0) * t + 8.0) * t - 4.0) * a);
    return 0.0f;
}

struct aa_taps {
    int   start = 0, count = 0;
    float w[16] = {};
};

// torch's _compute_indices_min_size_weights_aa in float32: scale and center are floats, the tap offset
// is (float(j) - center) then + 0.5 and * invscale in double, rounded to float for the filter.
aa_taps aa_weights(int in, int out, int i) {
    const float scale   = static_cast<float>(in) / static_cast<float>(out);
    const float support = scale >= 1.0f ? 2.0f * scale : 2.0f;
    const float invs    = scale >= 1.0f ? 1.0f / scale : 1.0f;
    const float center  = static_cast<float>(static_cast<double>(scale) * (i + 0.5));
    aa_taps     t;
    t.start        = std::max(static_cast<int>(center - support + 0.5), 0);
    const int xmax = std::min(static_cast<int>(center + support + 0.5), in);
    t.count        = std::min(xmax - t.start, 16);
    float total    = 0.0f;
    for (int j = 0; j < t.count; ++j) {
        const float d = static_cast<float>(t.start + j) - center;
        t.w[j]        = cubic_aa(static_cast<float>((static_cast<double>(d) + 0.5) * invs));
        total += t.w[j];
    }
    if (total != 0.0f) {
        for (int j = 0; j < t.count; ++j) t.w[j] /= total;
    }
    return t;
}

}  // namespace

void resize_bicubic_aa(const float * src, int in_h, int in_w, int c, float * dst, int out_h, int out_w,
                       float * scratch) {
    // Width pass: scratch [in_h, out_w, c].
    for (int ox = 0; ox < out_w; ++ox) {
        const aa_taps t = aa_weights(in_w, out_w, ox);
        for (int y = 0; y < in_h; ++y) {
            float * o = scratch + (static_cast<size_t>(y) * out_w + ox) * c;
            for (int ch = 0; ch < c; ++ch) {
                float acc = 0.0f;
                for (int j = 0; j < t.count; ++j) {
                    acc = std::fmaf(src[(static_cast<size_t>(y) * in_w + t.start + j) * c + ch], t.w[j], acc);
                }
                o[ch] = acc;
            }
        }
    }
    // Height pass.
    for (int oy = 0; oy < out_h; ++oy) {
        const aa_taps t = aa_weights(in_h, out_h, oy);
        for (int x = 0; x < out_w; ++x) {
            float * o = dst + (static_cast<size_t>(oy) * out_w + x) * c;
            for (int ch = 0; ch < c; ++ch) {
                float acc = 0.0f;
                for (int j = 0; j < t.count; ++j) {
                    acc = std::fmaf(scratch[(static_cast<size_t>(t.start + j) * out_w + x) * c + ch], t.w[j], acc);
                }
                o[ch] = acc;
            }
        }
    }
}

void im2col_3x3(const float * x, int ld, int h, int w, int c, float * cols, int y0, int y1) {
    const int kc = c * 9;
    for (int y = y0; y < y1; ++y) {
        for (int xx = 0; xx < w; ++xx) {
            float * row = cols + (static_cast<size_t>(y) * w + xx) * kc;
            for (int ky = 0; ky < 3; ++ky) {
                const int sy = y + ky - 1;
                for (int kx = 0; kx < 3; ++kx) {
                    const int sx = xx + kx - 1;
                    float *   dst = row + ky * 3 + kx;
                    if (sy < 0 || sy >= h || sx < 0 || sx >= w) {
                        for (int ci = 0; ci < c; ++ci) dst[ci * 9] = 0.0f;
                    } else {
                        const float * s = x + (static_cast<size_t>(sy) * w + sx) * ld;
                        for (int ci = 0; ci < c; ++ci) dst[ci * 9] = s[ci];
                    }
                }
            }
        }
    }
}

void topk(const float * scores, int n, int k, int32_t * idx, int32_t * scratch) {
    for (int i = 0; i < n; ++i) scratch[i] = i;
    k = std::min(k, n);
    std::partial_sort(scratch, scratch + k, scratch + n, [scores](int32_t a, int32_t b) {
        return scores[a] > scores[b] || (scores[a] == scores[b] && a < b);
    });
    std::copy(scratch, scratch + k, idx);
}

}  // namespace rfdetr::cpu
