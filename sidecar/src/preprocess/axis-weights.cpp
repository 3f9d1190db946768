#include "preprocess/axis-weights.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>

namespace rfdetr {

namespace {

// torch's aa_filter for bilinear: the argument arrives as float, `1.0 - x` is a double then stored as float.
float triangle(float x) {
    if (x < 0.0f) {
        x = -x;
    }
    if (x < 1.0f) {
        return static_cast<float>(1.0 - static_cast<double>(x));
    }
    return 0.0f;
}

}  // namespace

axis_weights axis_weights_compute(int in_size, int out_size) {
    if (in_size <= 0 || out_size <= 0) {
        throw std::invalid_argument("axis_weights_compute: expected positive sizes but received " +
                                    std::to_string(in_size) + " -> " + std::to_string(out_size));
    }
    // The types below are torch's with scalar_t = float: int64 - float is a float subtraction, while the
    // 0.5 literals and the products with them are double, rounded to float where torch stores a float.
    const float scale    = static_cast<float>(in_size) / static_cast<float>(out_size);
    const float support  = scale >= 1.0f ? scale : 1.0f;
    const float invscale = scale >= 1.0f ? static_cast<float>(1.0 / static_cast<double>(scale)) : 1.0f;

    axis_weights a;
    a.in_size  = in_size;
    a.out_size = out_size;
    a.max_taps = static_cast<int>(std::ceil(support)) * 2 + 1;
    a.start.resize(out_size);
    a.count.resize(out_size);
    a.weights.assign(static_cast<size_t>(out_size) * a.max_taps, 0.0f);
    for (int i = 0; i < out_size; i++) {
        const float   center = static_cast<float>(static_cast<double>(scale) * (i + 0.5));
        const int64_t xmin   = std::max<int64_t>(static_cast<int64_t>(static_cast<double>(center - support) + 0.5), 0);
        const int64_t xmax =
            std::min<int64_t>(static_cast<int64_t>(static_cast<double>(center + support) + 0.5), in_size);
        const int n = static_cast<int>(xmax - xmin);
        if (n <= 0 || n > a.max_taps) {
            throw std::logic_error("axis_weights_compute: " + std::to_string(n) + " taps for output " +
                                   std::to_string(i) + " of " + std::to_string(in_size) + " -> " +
                                   std::to_string(out_size) + " (max " + std::to_string(a.max_taps) + ")");
        }
        a.start[i]    = static_cast<int32_t>(xmin);
        a.count[i]    = n;
        float * w     = a.weights.data() + static_cast<size_t>(i) * a.max_taps;
        float   total = 0.0f;
        for (int j = 0; j < n; j++) {
            const float d = static_cast<float>(j + xmin) - center;
            w[j]          = triangle(static_cast<float>((static_cast<double>(d) + 0.5) * static_cast<double>(invscale)));
            total += w[j];
        }
        if (total != 0.0f) {
            for (int j = 0; j < n; j++) {
                w[j] /= total;
            }
        }
    }
    return a;
}

}  // namespace rfdetr
