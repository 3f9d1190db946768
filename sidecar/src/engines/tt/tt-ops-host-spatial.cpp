#include "engines/tt/tt-ops-host-spatial.h"

#include <algorithm>
#include <cmath>
#include <vector>

namespace rfdetr {
namespace tt {

namespace {

// Source taps of one axis: out index o reads in[i0] * (1 - l) + in[i1] * l.
struct taps {
    std::vector<int64_t> i0, i1;
    std::vector<float>   l;
};

taps axis_taps(int64_t in, int64_t out) {
    taps        t;
    const float ratio = (float)in / (float)out;  // torch's area_pixel_compute_scale for an output size
    for (int64_t o = 0; o < out; ++o) {
        float   src = std::max(((float)o + 0.5f) * ratio - 0.5f, 0.0f);
        int64_t i0  = std::min((int64_t)src, in - 1);
        t.i0.push_back(i0);
        t.i1.push_back(std::min(i0 + 1, in - 1));
        t.l.push_back(src - (float)i0);
    }
    return t;
}

}  // namespace

void tt_kernel_upsample_bilinear(const float * x, int64_t H, int64_t W, int64_t C, int scale, float * out) {
    const int64_t OH = H * scale, OW = W * scale;
    const taps    ty = axis_taps(H, OH), tx = axis_taps(W, OW);
    for (int64_t oy = 0; oy < OH; ++oy) {
        const float   ly = ty.l[oy];
        const float * r0 = x + ty.i0[oy] * W * C;
        const float * r1 = x + ty.i1[oy] * W * C;
        for (int64_t ox = 0; ox < OW; ++ox) {
            const float   lx = tx.l[ox];
            const float * a  = r0 + tx.i0[ox] * C;
            const float * b  = r0 + tx.i1[ox] * C;
            const float * c  = r1 + tx.i0[ox] * C;
            const float * d  = r1 + tx.i1[ox] * C;
            float *       o  = out + (oy * OW + ox) * C;
            // torch's order: h-lambdas outside, w-lambdas inside
            for (int64_t ch = 0; ch < C; ++ch) {
                o[ch] = (1.0f - ly) * ((1.0f - lx) * a[ch] + lx * b[ch]) + ly * ((1.0f - lx) * c[ch] + lx * d[ch]);
            }
        }
    }
}

void tt_kernel_dwconv_accumulate(const float * x, int64_t H, int64_t W, int64_t C, const float * w, int k, int pad, float * out) {
    // weights as [k*k, C] so the channel loop is contiguous
    std::vector<float> wt((size_t)k * k * C);
    for (int64_t c = 0; c < C; ++c) {
        for (int t = 0; t < k * k; ++t) {
            wt[(size_t)t * C + c] = w[c * k * k + t];
        }
    }
    for (int64_t y = 0; y < H; ++y) {
        for (int64_t xx = 0; xx < W; ++xx) {
            float * o = out + (y * W + xx) * C;
            for (int ky = 0; ky < k; ++ky) {
                const int64_t sy = y + ky - pad;
                if (sy < 0 || sy >= H) {
                    continue;
                }
                for (int kx = 0; kx < k; ++kx) {
                    const int64_t sx = xx + kx - pad;
                    if (sx < 0 || sx >= W) {
                        continue;
                    }
                    const float * s  = x + (sy * W + sx) * C;
                    const float * wk = wt.data() + (size_t)(ky * k + kx) * C;
                    for (int64_t c = 0; c < C; ++c) {
                        o[c] += wk[c] * s[c];
                    }
                }
            }
        }
    }
}

}  // namespace tt
}  // namespace rfdetr
