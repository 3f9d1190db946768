// Plain-loop references for the kernels in kernels.h: obvious code, double accumulation, no BLAS.
#include "engines/cpu/gemm.h"
#include "engines/cpu/kernels.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <vector>

namespace rfdetr::ref {

void gemm(int m, int n, int k, float alpha, const float * a, int lda, const float * b, int ldb, bool b_is_nk,
          float beta, float * c, int ldc) {
    for (int i = 0; i < m; ++i) {
        for (int j = 0; j < n; ++j) {
            double acc = 0.0;
            for (int p = 0; p < k; ++p) {
                const float bv = b_is_nk ? b[static_cast<size_t>(j) * ldb + p] : b[static_cast<size_t>(p) * ldb + j];
                acc += static_cast<double>(a[static_cast<size_t>(i) * lda + p]) * bv;
            }
            float & out = c[static_cast<size_t>(i) * ldc + j];
            out         = static_cast<float>(alpha * acc + (beta == 0.0f ? 0.0 : static_cast<double>(beta) * out));
        }
    }
}

void layernorm(const float * x, int ldx, float * y, int ldy, int rows, int dim, const float * gamma,
               const float * beta, float eps) {
    for (int r = 0; r < rows; ++r) {
        const float * xr   = x + static_cast<size_t>(r) * ldx;
        double        mean = 0.0;
        for (int j = 0; j < dim; ++j) mean += xr[j];
        mean /= dim;
        double var = 0.0;
        for (int j = 0; j < dim; ++j) var += (xr[j] - mean) * (xr[j] - mean);
        var /= dim;
        const double rstd = 1.0 / std::sqrt(var + eps);
        std::vector<float> out(dim);
        for (int j = 0; j < dim; ++j) out[j] = static_cast<float>((xr[j] - mean) * rstd * gamma[j] + beta[j]);
        std::copy(out.begin(), out.end(), y + static_cast<size_t>(r) * ldy);
    }
}

float gelu(float x) {
    const double xd = x;
    return static_cast<float>(0.5 * xd * (1.0 + std::erf(xd / std::sqrt(2.0))));
}

float epilogue(const cpu::epilogue & e, int j, float t, float c) {
    using cpu::epi;
    switch (e.kind) {
        case epi::store: return e.alpha * t;
        case epi::accumulate: return c + t;
        case epi::bias: return t + e.bias[j];
        case epi::bias_relu: return std::max(t + e.bias[j], 0.0f);
        case epi::bias_gelu: return gelu(t + e.bias[j]);
        case epi::bias_scale_add: return (t + e.bias[j]) * e.scale[j] + c;
        case epi::bias_residual: return (t + e.bias[j]) + c;
        case epi::bias_gelu_add: return gelu(t + e.bias[j]) + c;
    }
    return t;
}

void softmax_rows(float * x, int ld, int rows, int cols) {
    for (int r = 0; r < rows; ++r) {
        float * row = x + static_cast<size_t>(r) * ld;
        double  mx  = row[0];
        for (int j = 1; j < cols; ++j) mx = std::max(mx, static_cast<double>(row[j]));
        double sum = 0.0;
        std::vector<double> e(cols);
        for (int j = 0; j < cols; ++j) sum += e[j] = std::exp(row[j] - mx);
        for (int j = 0; j < cols; ++j) row[j] = static_cast<float>(e[j] / sum);
    }
}

void attention_head(const float * q, int ldq, const float * k, int ldk, const float * v, int ldv, float * o,
                    int ldo, int nq, int nk, int d, float scale) {
    std::vector<double> s(nk);
    for (int i = 0; i < nq; ++i) {
        double mx = -INFINITY;
        for (int j = 0; j < nk; ++j) {
            double acc = 0.0;
            for (int p = 0; p < d; ++p) acc += static_cast<double>(q[static_cast<size_t>(i) * ldq + p]) * k[static_cast<size_t>(j) * ldk + p];
            s[j] = acc * scale;
            mx   = std::max(mx, s[j]);
        }
        double sum = 0.0;
        for (int j = 0; j < nk; ++j) sum += s[j] = std::exp(s[j] - mx);
        for (int p = 0; p < d; ++p) {
            double acc = 0.0;
            for (int j = 0; j < nk; ++j) acc += s[j] * v[static_cast<size_t>(j) * ldv + p];
            o[static_cast<size_t>(i) * ldo + p] = static_cast<float>(acc / sum);
        }
    }
}

void grid_sample_bilinear(const float * chw, int nc, int h, int w, float gx, float gy, float * out) {
    // torch's unnormalisation for align_corners=False: ((g + 1) * size - 1) / 2.
    const double ix = ((static_cast<double>(gx) + 1.0) * w - 1.0) / 2.0;
    const double iy = ((static_cast<double>(gy) + 1.0) * h - 1.0) / 2.0;
    const int    x0 = static_cast<int>(std::floor(ix)), y0 = static_cast<int>(std::floor(iy));
    for (int c = 0; c < nc; ++c) {
        double acc = 0.0;
        for (int dy = 0; dy < 2; ++dy) {
            for (int dx = 0; dx < 2; ++dx) {
                const int xx = x0 + dx, yy = y0 + dy;
                if (xx < 0 || xx >= w || yy < 0 || yy >= h) continue;
                const double wx = dx ? ix - x0 : 1.0 - (ix - x0);
                const double wy = dy ? iy - y0 : 1.0 - (iy - y0);
                acc += wx * wy * chw[(static_cast<size_t>(c) * h + yy) * w + xx];
            }
        }
        out[c] = static_cast<float>(acc);
    }
}

namespace {
double keys_cubic(double x) {
    const double a = -0.5;
    x              = std::fabs(x);
    if (x < 1.0) return ((a + 2.0) * x - (a + 3.0)) * x * x + 1.0;
    if (x < 2.0) return (((x - 5.0) * x + 8.0) * x - 4.0) * a;
    return 0.0;
}

// Antialiased resampling weights for one axis, in double (PIL / torch AA semantics).
std::vector<std::vector<double>> axis_weights(int in, int out, std::vector<int> & start) {
    // torch's geometry is float32 (scale, center, tap offset); the weights and sums are exact math here.
    const float  scale_f = static_cast<float>(in) / static_cast<float>(out);
    const double scale   = scale_f;
    const double support = scale >= 1.0 ? 2.0 * scale : 2.0;
    const double invs    = scale >= 1.0 ? 1.0 / scale : 1.0;
    std::vector<std::vector<double>> ws(out);
    start.assign(out, 0);
    for (int i = 0; i < out; ++i) {
        const float  center = static_cast<float>(scale * (i + 0.5));
        const int    xmin   = std::max(static_cast<int>(center - support + 0.5), 0);
        const int    xmax   = std::min(static_cast<int>(center + support + 0.5), in);
        start[i]            = xmin;
        double total        = 0.0;
        for (int j = xmin; j < xmax; ++j) {
            const float offset = static_cast<float>(j) - center;
            ws[i].push_back(keys_cubic(static_cast<float>((offset + 0.5) * invs)));
            total += ws[i].back();
        }
        for (auto & v : ws[i]) v /= total;
    }
    return ws;
}
}  // namespace

void resize_bicubic_aa(const float * src, int in_h, int in_w, int c, float * dst, int out_h, int out_w) {
    std::vector<int> sx, sy;
    const auto       wx = axis_weights(in_w, out_w, sx);
    const auto       wy = axis_weights(in_h, out_h, sy);
    for (int oy = 0; oy < out_h; ++oy) {
        for (int ox = 0; ox < out_w; ++ox) {
            for (int ch = 0; ch < c; ++ch) {
                double acc = 0.0;
                for (size_t a = 0; a < wy[oy].size(); ++a) {
                    for (size_t b = 0; b < wx[ox].size(); ++b) {
                        acc += wy[oy][a] * wx[ox][b] * src[((sy[oy] + a) * in_w + sx[ox] + b) * c + ch];
                    }
                }
                dst[(static_cast<size_t>(oy) * out_w + ox) * c + ch] = static_cast<float>(acc);
            }
        }
    }
}

void conv3x3(const float * x, int h, int w, int cin, const float * weight, int cout, float * y) {
    for (int yy = 0; yy < h; ++yy) {
        for (int xx = 0; xx < w; ++xx) {
            for (int co = 0; co < cout; ++co) {
                double acc = 0.0;
                for (int ci = 0; ci < cin; ++ci) {
                    for (int ky = 0; ky < 3; ++ky) {
                        for (int kx = 0; kx < 3; ++kx) {
                            const int sy = yy + ky - 1, sx = xx + kx - 1;
                            if (sy < 0 || sy >= h || sx < 0 || sx >= w) continue;
                            acc += static_cast<double>(weight[((static_cast<size_t>(co) * cin + ci) * 3 + ky) * 3 + kx]) *
                                   x[(static_cast<size_t>(sy) * w + sx) * cin + ci];
                        }
                    }
                }
                y[(static_cast<size_t>(yy) * w + xx) * cout + co] = static_cast<float>(acc);
            }
        }
    }
}

void topk(const float * scores, int n, int k, int32_t * idx) {
    std::vector<int32_t> order(n);
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), [scores](int32_t a, int32_t b) { return scores[a] > scores[b]; });
    std::copy(order.begin(), order.begin() + std::min(k, n), idx);
}

}  // namespace rfdetr::ref
