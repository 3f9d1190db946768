#include "engines/cpu/seg-head.h"

#include "common/error.h"
#include "engines/cpu/bgemm.h"
#include "engines/cpu/qgemm.h"

#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstring>

namespace rfdetr::cpu {

namespace {

constexpr float k_eps_block = 1e-6f;  // the depthwise-conv blocks' LayerNorm
constexpr float k_eps_query = 1e-5f;  // the query MLP block's LayerNorm
constexpr int   k_max_mr    = 16;     // at least every micro-kernel's gemm_mr()

size_t sz(int a, int b) { return static_cast<size_t>(a) * static_cast<size_t>(b); }

// torch's source index for F.interpolate(mode="bilinear", align_corners=False) with an output size (no scale
// factor): scale = in / out and the source coordinate in float, clamped at 0; the lower tap and the weights.
void source_index(int in, int out, int o, int & i0, int & i1, float & l0, float & l1) {
    if (in == out) {
        i0 = i1 = o;
        l0 = 1.0f;
        l1 = 0.0f;
        return;
    }
    const float scale = static_cast<float>(in) / static_cast<float>(out);
    const float real  = std::max(scale * (static_cast<float>(o) + 0.5f) - 0.5f, 0.0f);
    i0                = std::min(static_cast<int>(std::floor(real)), in - 1);
    l1                = std::min(std::max(real - static_cast<float>(i0), 0.0f), 1.0f);
    i1                = i0 + (i0 < in - 1 ? 1 : 0);
    l0                = 1.0f - l1;
}

// Bilinear resize of a pixel-major map [h*w, c] to [H*W, c], output rows [y0, y1), with torch's channels-last
// arithmetic (the projector's output is a permuted, channels-last tensor): four corner weights h·w, summed
// x00·w00 + (x01·w01 + (x10·w10 + x11·w11)).
void resize_bilinear(const float * src, int h, int w, int c, float * dst, int H, int W, int y0, int y1) {
    for (int oy = y0; oy < y1; ++oy) {
        int   iy0, iy1;
        float hl0, hl1;
        source_index(h, H, oy, iy0, iy1, hl0, hl1);
        for (int ox = 0; ox < W; ++ox) {
            int   ix0, ix1;
            float wl0, wl1;
            source_index(w, W, ox, ix0, ix1, wl0, wl1);
            const float   w00 = hl0 * wl0, w01 = hl0 * wl1, w10 = hl1 * wl0, w11 = hl1 * wl1;
            const float * x00 = src + sz(iy0 * w + ix0, c);
            const float * x01 = src + sz(iy0 * w + ix1, c);
            const float * x10 = src + sz(iy1 * w + ix0, c);
            const float * x11 = src + sz(iy1 * w + ix1, c);
            float * __restrict o = dst + sz(oy * W + ox, c);
            for (int ch = 0; ch < c; ++ch) o[ch] = x00[ch] * w00 + (x01[ch] * w01 + (x10[ch] * w10 + x11[ch] * w11));
        }
    }
}

// Depthwise 3x3 convolution, zero padding 1, of a pixel-major map [h*w, c] (weights tap-major [9][c]), output
// rows [y0, y1): the nine taps summed in (ky, kx) order, then the bias. 32 channels at a time stay in four
// registers across the taps (a loop over the output row per tap measured 15 % of the head's CPU, the GEMMs 60 %).
void dwconv3x3(const float * x, int h, int w, int c, const float * w9, const float * bias, float * y, int y0, int y1) {
    const float * taps[9];
    const float * wts[9];
    for (int oy = y0; oy < y1; ++oy) {
        for (int ox = 0; ox < w; ++ox) {
            int n = 0;
            for (int ky = 0; ky < 3; ++ky) {
                const int iy = oy + ky - 1;
                if (iy < 0 || iy >= h) continue;
                for (int kx = 0; kx < 3; ++kx) {
                    const int ix = ox + kx - 1;
                    if (ix < 0 || ix >= w) continue;
                    taps[n]  = x + sz(iy * w + ix, c);
                    wts[n++] = w9 + sz(ky * 3 + kx, c);
                }
            }
            float * o  = y + sz(oy * w + ox, c);
            int     ch = 0;
            for (; ch + 32 <= c; ch += 32) {
                __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
                for (int t = 0; t < n; ++t) {
                    const float * s = taps[t] + ch, *k = wts[t] + ch;
                    a0 = _mm256_add_ps(a0, _mm256_mul_ps(_mm256_loadu_ps(s), _mm256_loadu_ps(k)));
                    a1 = _mm256_add_ps(a1, _mm256_mul_ps(_mm256_loadu_ps(s + 8), _mm256_loadu_ps(k + 8)));
                    a2 = _mm256_add_ps(a2, _mm256_mul_ps(_mm256_loadu_ps(s + 16), _mm256_loadu_ps(k + 16)));
                    a3 = _mm256_add_ps(a3, _mm256_mul_ps(_mm256_loadu_ps(s + 24), _mm256_loadu_ps(k + 24)));
                }
                _mm256_storeu_ps(o + ch, _mm256_add_ps(a0, _mm256_loadu_ps(bias + ch)));
                _mm256_storeu_ps(o + ch + 8, _mm256_add_ps(a1, _mm256_loadu_ps(bias + ch + 8)));
                _mm256_storeu_ps(o + ch + 16, _mm256_add_ps(a2, _mm256_loadu_ps(bias + ch + 16)));
                _mm256_storeu_ps(o + ch + 24, _mm256_add_ps(a3, _mm256_loadu_ps(bias + ch + 24)));
            }
            for (; ch < c; ++ch) {
                float acc = 0.0f;
                for (int t = 0; t < n; ++t) acc += taps[t][ch] * wts[t][ch];
                o[ch] = acc + bias[ch];
            }
        }
    }
}

epilogue epi_of(epi kind, const float * bias) {
    epilogue e;
    e.kind = kind;
    e.bias = bias;
    return e;
}

}  // namespace

seg_head::seg_head(const seg_head_weights & w, const seg_head_dims & d, thread_pool & pool, precision p)
    : d_(d), pool_(pool) {
    if (static_cast<int>(w.blocks.size()) != d.blocks) {
        throw error("seg_head: " + std::to_string(w.blocks.size()) + " depthwise-conv blocks given, the dims say " +
                    std::to_string(d.blocks));
    }
    const int D    = d.dim;
    auto      pack = [&](const float * src, int n, int k, bool in_prec) {
        return pack_weight_as(in_prec ? p : precision::fp32, src, n, k, k);
    };
    for (const auto & b : w.blocks) {
        block blk;
        blk.dw.resize(sz(9, D));
        for (int ch = 0; ch < D; ++ch) {
            for (int t = 0; t < 9; ++t) blk.dw[sz(t, D) + ch] = b.dw_w[sz(ch, 9) + t];
        }
        blk.dw_b = b.dw_b;
        blk.ln_g = b.ln_g;
        blk.ln_b = b.ln_b;
        blk.pw_b = b.pw_b;
        blk.pw   = pack(b.pw_w, D, D, true);
        blocks_.push_back(std::move(blk));
    }
    sp_   = pack(w.sp_w, D, D, true);
    sp_b_ = w.sp_b;
    qn_g_ = w.qn_g;
    qn_b_ = w.qn_b;
    q1_   = pack(w.q1_w, d.hidden, D, false);
    q1_b_ = w.q1_b;
    q2_   = pack(w.q2_w, D, d.hidden, false);
    q2_b_ = w.q2_b;
    qp_   = pack(w.qp_w, D, D, false);
    qp_b_ = w.qp_b;
    std::fill(bias_, bias_ + k_gemm_nr, w.bias);

    const int pixels = d.side * d.side;
    x_.resize(sz(pixels, D));
    conv_.resize(sz(pixels, D));
    s_.n = pixels;
    s_.k = D;
    s_.data.assign(sz((pixels + k_gemm_nr - 1) / k_gemm_nr * k_gemm_nr, D), 0.0f);
    qh_.resize(sz(d.queries, D));
    qm_.resize(sz(d.queries, d.hidden));
    qf_.resize(sz(d.queries, D));
    qa_.resize(sz((d.queries + k_max_mr - 1) / k_max_mr * k_max_mr, D));
    scratch_stride_ = (gemm_scratch_floats(std::max(D, d.hidden)) + 15) & ~static_cast<size_t>(15);
    scratch_.resize(scratch_stride_ * pool_.size());
}

void seg_head::linear(const float * a, int lda, int m, const packed_weight & w, float * c, int ldc, const epilogue & e,
                      const a_layernorm * ln) {
    const int parts = gemm_row_parts(m, pool_.size());
    pool_.parallel_for(parts, [&](int p, int thread) {
        int r0, r1;
        gemm_row_range(m, parts, p, r0, r1);
        gemm_packed(r1 - r0, a + sz(r0, lda), lda, w, c + sz(r0, ldc), ldc, e, scratch(thread), ln);
    });
}

void seg_head::spatial(const float * memory) {
    const int D = d_.dim, M = d_.side, pixels = M * M;
    const int bands = std::min(4 * pool_.size(), M);  // image row bands
    auto      rows  = [&](int band, int & y0, int & y1) {
        y0 = M * band / bands;
        y1 = M * (band + 1) / bands;
    };
    pool_.parallel_for(bands, [&](int band, int) {
        int y0, y1;
        rows(band, y0, y1);
        resize_bilinear(memory, d_.grid, d_.grid, D, x_.data(), M, M, y0, y1);
    });
    if (tap) tap("spatial_upsampled", x_.data());
    // Each block: x = x + GELU(pwconv1(LN(dwconv(x)))), the LayerNorm in the GEMM's A pass, GELU and the
    // residual in its epilogue.
    for (size_t b = 0; b < blocks_.size(); ++b) {
        const block & blk = blocks_[b];
        pool_.parallel_for(bands, [&](int band, int) {
            int y0, y1;
            rows(band, y0, y1);
            dwconv3x3(x_.data(), M, M, D, blk.dw.data(), blk.dw_b, conv_.data(), y0, y1);
        });
        const a_layernorm ln{blk.ln_g, blk.ln_b, k_eps_block};
        linear(conv_.data(), D, pixels, blk.pw, x_.data(), D, epi_of(epi::bias_gelu_add, blk.pw_b), &ln);
        if (tap) tap("block_out." + std::to_string(b), x_.data());
    }
    // s = 1x1 conv, then into panels of 32 pixels ([dim][32] each): the mask product's B operand.
    linear(x_.data(), D, pixels, sp_, conv_.data(), D, epi_of(epi::bias, sp_b_));
    const int panels = (pixels + k_gemm_nr - 1) / k_gemm_nr;
    pool_.parallel_for(panels, [&](int p, int) {
        const float * src[k_gemm_nr];
        const int     n = std::min(k_gemm_nr, pixels - p * k_gemm_nr);
        for (int r = 0; r < n; ++r) src[r] = conv_.data() + sz(p * k_gemm_nr + r, D);
        transpose_rows(src, n, D, s_.data.data() + sz(p, D * k_gemm_nr), k_gemm_nr);
    });
}

float seg_head::spatial_at(int pix, int ch) const {
    return s_.panel(pix / k_gemm_nr)[sz(ch, k_gemm_nr) + pix % k_gemm_nr];
}

void seg_head::masks(const float * hs, const uint32_t * queries, int k, float * out) {
    if (k <= 0) return;
    if (k > d_.queries) {
        throw error("seg_head::masks: " + std::to_string(k) + " rows asked for, at most " + std::to_string(d_.queries));
    }
    const int D = d_.dim, pixels = d_.side * d_.side;
    for (int i = 0; i < k; ++i) std::memcpy(qh_.data() + sz(i, D), hs + sz(queries[i], D), sz(D, 4));
    // q = proj(hs + fc2(GELU(fc1(LN(hs))))) for the asked rows only.
    const a_layernorm ln{qn_g_, qn_b_, k_eps_query};
    linear(qh_.data(), D, k, q1_, qm_.data(), d_.hidden, epi_of(epi::bias_gelu, q1_b_), &ln);
    linear(qm_.data(), d_.hidden, k, q2_, qh_.data(), D, epi_of(epi::bias_residual, q2_b_));
    linear(qh_.data(), D, k, qp_, qf_.data(), D, epi_of(epi::bias, qp_b_));

    // out = q s^T + bias: q packed once as micro-tile A operands ([dim][mr] per tile), then each 32-pixel panel
    // of s meets every tile while it is in L1; panels split over the pool (k may be a single tile).
    const int mr    = gemm_mr();
    const int tiles = (k + mr - 1) / mr;
    for (int t = 0; t < tiles; ++t) {
        const float * src[k_max_mr];
        const int     n = std::min(mr, k - t * mr);
        for (int r = 0; r < n; ++r) src[r] = qf_.data() + sz(t * mr + r, D);
        transpose_rows(src, n, D, qa_.data() + sz(t * mr, D), mr);
    }
    const epilogue e      = epi_of(epi::bias, bias_);  // every column's bias is the scalar
    const int      panels = (pixels + k_gemm_nr - 1) / k_gemm_nr;
    const int      parts  = std::min(panels, 4 * pool_.size());
    pool_.parallel_for(parts, [&](int part, int) {
        for (int p = panels * part / parts; p < panels * (part + 1) / parts; ++p) {
            const int ncols = std::min(k_gemm_nr, pixels - p * k_gemm_nr);
            for (int t = 0; t < tiles; ++t) {
                gemm_tile(std::min(mr, k - t * mr), D, qa_.data() + sz(t * mr, D), mr, s_.panel(p), k_gemm_nr,
                          out + sz(t * mr, pixels) + p * k_gemm_nr, pixels, ncols, e);
            }
        }
    });
}

}  // namespace rfdetr::cpu
