// The per-axis resampling weights of the fixtures' resize recipe (shared/fixtures/rfdetr-synth/README.md,
// "Preprocessing"): torch's antialiased triangle filter (`_compute_weights_aa`, bilinear, align_corners off)
// with every intermediate in the type torch uses, so the weights are the reference's bit for bit.
#pragma once

#include <cstdint>
#include <vector>

namespace rfdetr {

struct axis_weights {
    int                  in_size  = 0;
    int                  out_size = 0;
    int                  max_taps = 0;  // ceil(support)*2 + 1: the widest any output can be
    std::vector<int32_t> start;         // output i reads in[start[i] .. start[i] + count[i])
    std::vector<int32_t> count;
    std::vector<float>   weights;  // [out_size][max_taps]; weights[i*max_taps + j], j < count[i]
};

// Throws std::invalid_argument unless both sizes are positive.
axis_weights axis_weights_compute(int in_size, int out_size);

}  // namespace rfdetr
