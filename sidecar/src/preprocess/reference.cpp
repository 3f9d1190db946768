// The recipe written out plainly, one value at a time: the oracle the SIMD levels are tested against.
#include "preprocess/preprocess.h"

#include <cmath>
#include <vector>

namespace rfdetr {

void preprocess_reference(const uint8_t * rgb, int width, int height, int out_size, float * out) {
    const axis_weights wx = axis_weights_compute(width, out_size);
    const axis_weights wy = axis_weights_compute(height, out_size);
    const size_t       s  = static_cast<size_t>(out_size);
    std::vector<float> tmp(static_cast<size_t>(height) * s * 3);  // [height][S][3]
    for (size_t y = 0; y < static_cast<size_t>(height); y++) {
        for (size_t x = 0; x < s; x++) {
            const float * w = wx.weights.data() + x * wx.max_taps;
            for (size_t c = 0; c < 3; c++) {
                float acc = 0.0f;
                for (int j = 0; j < wx.count[x]; j++) {
                    const size_t px = y * static_cast<size_t>(width) + static_cast<size_t>(wx.start[x] + j);
                    acc             = std::fmaf(static_cast<float>(rgb[px * 3 + c]), w[j], acc);
                }
                tmp[(y * s + x) * 3 + c] = acc;
            }
        }
    }
    for (size_t oy = 0; oy < s; oy++) {
        const float * w = wy.weights.data() + oy * wy.max_taps;
        for (size_t x = 0; x < s; x++) {
            for (size_t c = 0; c < 3; c++) {
                float acc = 0.0f;
                for (int j = 0; j < wy.count[oy]; j++) {
                    const size_t row = static_cast<size_t>(wy.start[oy] + j);
                    acc              = std::fmaf(tmp[(row * s + x) * 3 + c], w[j], acc);
                }
                out[c * s * s + oy * s + x] = normalise_value(acc, k_imagenet_mean[c], k_imagenet_std[c]);
            }
        }
    }
}

}  // namespace rfdetr
