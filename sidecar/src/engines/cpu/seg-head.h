// RF-DETR Seg's mask head on the CPU (upstream SegmentationHead.forward_export; the fixture README
// ../shared/fixtures/rfdetr-seg/nano/README.md has the math): a query-independent spatial part (the projector
// output upsampled to R/4, one depthwise-conv block per decoder layer, a 1x1 projection) computed once, and a
// query part (MLP block, projection, mask logits q·s + bias) computed only for the queries asked for.
// Maps are pixel-major [side*side, dim]; every buffer is sized in the constructor.
#pragma once

#include "engines/cpu/gemm.h"
#include "engines/cpu/precision.h"
#include "engines/cpu/thread-pool.h"

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace rfdetr::cpu {

struct seg_head_dims {
    int grid    = 0;  // projector output side (R / patch)
    int side    = 0;  // mask side M = R / 4
    int dim     = 0;  // d_model (256)
    int blocks  = 0;  // depthwise-conv blocks (= decoder layers)
    int hidden  = 0;  // query MLP width (1024)
    int queries = 0;  // most rows one masks() call computes
};

// Torch layouts, read in place (the linear weights are repacked by the constructor).
struct seg_head_weights {
    struct block {
        const float * dw_w = nullptr;  // [dim, 1, 3, 3]
        const float * dw_b = nullptr;  // [dim]
        const float * ln_g = nullptr, *ln_b = nullptr;  // LayerNorm eps 1e-6
        const float * pw_w = nullptr, *pw_b = nullptr;  // Linear [dim, dim]
    };
    std::vector<block> blocks;
    const float *      sp_w = nullptr, *sp_b = nullptr;  // 1x1 conv [dim, dim, 1, 1]
    const float *      qn_g = nullptr, *qn_b = nullptr;  // query block LayerNorm eps 1e-5
    const float *      q1_w = nullptr, *q1_b = nullptr;  // [hidden, dim]
    const float *      q2_w = nullptr, *q2_b = nullptr;  // [dim, hidden]
    const float *      qp_w = nullptr, *qp_b = nullptr;  // [dim, dim]
    float              bias = 0.0f;                      // the scalar added to every mask logit
};

class seg_head {
  public:
    // int8 / bf16: the pointwise linears of the spatial part (blocks' pwconv1, the 1x1 projection) run in the
    // int8 (qgemm.h) or bf16 (bgemm.h) GEMM; the query part and the mask product stay float (README.md, "RF-DETR Seg").
    seg_head(const seg_head_weights & w, const seg_head_dims & d, thread_pool & pool, precision p);

    // The spatial features s [side^2, dim] from the projector output memory [grid^2, dim].
    void spatial(const float * memory);
    // out[i] [side^2] = the mask logits of query queries[i], i < k <= dims().queries, from the decoder output hs
    // [*, dim] and the last spatial().
    void masks(const float * hs, const uint32_t * queries, int k, float * out);

    const seg_head_dims & dims() const { return d_; }
    // s[pix, ch] of the last spatial() (held in the mask product's panel layout).
    float spatial_at(int pix, int ch) const;
    // The query features [k, dim] of the last masks() call, row i for queries[i].
    const float * query_features() const { return qf_.data(); }

    // Test hook: called during spatial() with each intermediate map [side^2, dim] ("spatial_upsampled",
    // "block_out.<i>") while it is live.
    std::function<void(const std::string &, const float *)> tap;

  private:
    // c = e(LN?(a) W^T) over m rows, split over the pool.
    void linear(const float * a, int lda, int m, const packed_weight & w, float * c, int ldc, const epilogue & e,
                const a_layernorm * ln = nullptr);
    float * scratch(int thread) { return scratch_.data() + scratch_stride_ * thread; }

    seg_head_dims  d_;
    thread_pool &  pool_;
    struct block {
        std::vector<float> dw;  // [9][dim]: tap-major, so a pixel's channels are contiguous
        const float *      dw_b, *ln_g, *ln_b, *pw_b;
        packed_weight      pw;
    };
    std::vector<block> blocks_;
    packed_weight      sp_, q1_, q2_, qp_;
    const float *      sp_b_, *qn_g_, *qn_b_, *q1_b_, *q2_b_, *qp_b_;
    float              bias_[k_gemm_nr];  // the scalar bias as a column vector for the tile epilogue

    std::vector<float> x_, conv_;   // [side^2, dim]: the running map, the depthwise output (and s before packing)
    packed_weight      s_;          // s as panels of 32 pixels: the B operand of the mask product
    std::vector<float> qh_, qm_, qf_, qa_;  // query rows, MLP hidden, features, features packed as A tiles
    std::vector<float> scratch_;
    size_t             scratch_stride_ = 0;
};

}  // namespace rfdetr::cpu
