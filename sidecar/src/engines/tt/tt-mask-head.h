// The RF-DETR Seg mask head (upstream SegmentationHead.forward_export) as device-graph ops (tt-ops.h), split
// where the request's variable row count starts:
//   traced with the rest of the graph (fixed shapes, one trace per loaded variant):
//     x = upsample_bilinear(projector.out, (R/4) / grid); per block x = x + GELU(pwconv1(LN_1e-6(dwconv3x3(x) + b)))
//     (exact GELU); s = the 1x1 projection of x; q = query_features_proj(hs + MLP(LN_1e-5(hs))) for all Q queries;
//     the traced outputs are q [Q, 256] and sT [256, M*M];
//   eager, after the replay, for the K selected queries only (masks()): upload the K row indices, gather those rows
//     of q, pred_masks = q_K @ sT + bias -> [K, M*M], read back. K is rounded up to a multiple of 32 (the tile
//     height: the padded rows cost no extra tile work), so the device compiles at most ceil(Q/32) program
//     variants of the three eager ops; the padding rows repeat the first index and are not read out.
// Why not trace the matmul for all Q and copy the selected rows: the selection (row-select.h) is computed from
// the replayed logits, so the unselected queries' Q x M^2 products would be spent on every request and their
// rows would still need a gather before the copy; the eager part is three small ops on resident tensors.
#pragma once

#include "engines/tt/tt-ops.h"
#include "engines/tt/tt-prep.h"

#include <map>
#include <string>
#include <vector>

namespace rfdetr {

class checkpoint;

namespace tt {

class tt_mask_head {
  public:
    // Uploads the head's weights (fp32 when weights_fp32, as the plan's other weights) for the checkpoint's
    // mask_blocks blocks. Throws when the mask side (model_arch::mask_side, R/4) is not an integer multiple of the
    // patch grid (the upsample is an integer-scale op).
    tt_mask_head(tt_ops & ops, const checkpoint & ck, const tt_dims & d, int mask_side, int blocks, int num_queries,
                 const tt_math & math, bool weights_fp32);

    // Issues the traced part from the projector output memory [1, grid^2, 256] and the decoder's normed last
    // hidden state hs [1, Q, 256]; adds the taps seg.spatial_upsampled, seg.block_out.<i>, seg.spatial_proj
    // (channels-last [1, M, M, 256]) and seg.query_features ([1, Q, 256]).
    void build(const tt_tensor & memory, const tt_tensor & hs, std::map<std::string, tt_tensor> & taps);

    // pred_masks rows of the given queries (each < Q, any order, repeats allowed) into out [rows.size(), M*M],
    // in that order. Runs eagerly on the tensors of the last build/replay; nothing for no rows.
    void masks(const std::vector<int> & rows, float * out);

    int mask_side() const { return side_; }
    int num_queries() const { return num_queries_; }

  private:
    struct block {
        tt_tensor dw_w, dw_b, ln_w, ln_b, pw_w, pw_b;
    };
    tt_tensor up(const std::vector<float> & v, const tt_shape & shape);

    tt_ops &           ops_;
    tt_math            math_;
    int                grid_ = 0, side_ = 0, scale_ = 0, d_model_ = 0, num_queries_ = 0;
    bool               weights_fp32_ = false;
    std::vector<block> blocks_;
    tt_tensor          proj_w_, proj_b_, qn_w_, qn_b_, q1_w_, q1_b_, q2_w_, q2_b_, qp_w_, qp_b_, bias_, ones_;
    tt_tensor          q_, s_t_;  // the traced outputs masks() reads: q [Q, 256], sT [256, M*M]
};

}  // namespace tt
}  // namespace rfdetr
