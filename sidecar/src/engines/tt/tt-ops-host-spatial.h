// fp32 kernels of the mask head's spatial ops (RF-DETR Seg), channels-last: the bilinear upsample of the projector
// output and the depthwise 3x3 convolution. The host implementation (tt-ops-host.cpp) calls them with the operands
// the device numerics read (tf32 / fidelity-truncated at --precision bf16) and rounds their outputs.
#pragma once

#include <cstdint>

namespace rfdetr {
namespace tt {

// x [H, W, C] -> out [H*scale, W*scale, C], torch's bilinear with align_corners=False: per axis
// src = max((dst + 0.5) * (in / out) - 0.5, 0), i0 = floor(src), i1 = min(i0 + 1, in - 1), lambda = src - i0.
void tt_kernel_upsample_bilinear(const float * x, int64_t H, int64_t W, int64_t C, int scale, float * out);

// out [H, W, C] += depthwise conv of x [H, W, C] with w [C, k, k] (torch's [C,1,k,k]), stride 1, zero pad.
void tt_kernel_dwconv_accumulate(const float * x, int64_t H, int64_t W, int64_t C, const float * w, int k, int pad, float * out);

}  // namespace tt
}  // namespace rfdetr
