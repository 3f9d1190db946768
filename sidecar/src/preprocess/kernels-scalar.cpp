// The scalar kernels: the lane-major tables walked one lane at a time (the fallback, and the level the
// SIMD levels are checked against besides the reference).
#include "preprocess/kernels.h"

#include <cmath>

namespace rfdetr {

namespace {

void width_row_scalar(const width_plan & p, const uint8_t * row, float * r, float * g, float * b) {
    const int blocks = p.out_padded / k_lanes;
    for (int bl = 0; bl < blocks; bl++) {
        const int32_t * off = p.offset.data() + p.base[bl];
        const float *   wt  = p.weight.data() + p.base[bl];
        for (int k = 0; k < k_lanes; k++) {
            float ar = 0.0f, ag = 0.0f, ab = 0.0f;
            for (int j = 0; j < p.taps[bl]; j++) {
                const uint8_t * px = row + off[j * k_lanes + k];
                const float     w  = wt[j * k_lanes + k];
                ar                 = std::fmaf(static_cast<float>(px[0]), w, ar);
                ag                 = std::fmaf(static_cast<float>(px[1]), w, ag);
                ab                 = std::fmaf(static_cast<float>(px[2]), w, ab);
            }
            const int x = bl * k_lanes + k;
            r[x]        = ar;
            g[x]        = ag;
            b[x]        = ab;
        }
    }
}

void height_row_scalar(const float * src, size_t stride, int n, const float * w, int out_size, float mean,
                       float std, float * out) {
    for (int x = 0; x < out_size; x++) {
        float acc = 0.0f;
        for (int j = 0; j < n; j++) {
            acc = std::fmaf(src[j * stride + x], w[j], acc);
        }
        out[x] = normalise_value(acc, mean, std);
    }
}

}  // namespace

const kernel_table k_kernels_scalar = {width_row_scalar, nullptr, nullptr, height_row_scalar};

}  // namespace rfdetr
