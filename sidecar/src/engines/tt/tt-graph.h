// The RF-DETR device graph, written once against the op vocabulary (tt-ops.h) and sized by the checkpoint's
// variant (model_arch -> tt_dims: resolution, patch, windows, taps, global blocks, decoder depth, widths).
// Its decomposition follows the Python ttnn port (changh95/tt-RF-DETR): host im2col -> patch matmul +
// constant cls/pos -> DINOv2 blocks up to the last tap (Base: 0..10, block 11 is dead; Nano..Large: all 12)
// with fused qkv, SDPA and matmul+layerscale+residual -> feature shaping as one 0/1 permutation matmul +
// LayerNorm -> C2f projector (1x1 as linear, 3x3 as conv2d) -> two-stage top-k on device -> the decoder
// layers with the deformable-attention sampling core -> heads. Single-level (P4) variants only.
#pragma once

#include "engines/tt/tt-mask-head.h"
#include "engines/tt/tt-ops.h"
#include "engines/tt/tt-prep.h"
#include "model/schema.h"

#include <map>
#include <memory>
#include <string>
#include <vector>

namespace rfdetr {

class checkpoint;

namespace tt {

// The precision plan: the numerics (tt_math) the graph sets per stage before issuing it. One plan drives both
// implementations: the ttnn layer turns it into compute kernel configs and output dtypes, the host layer (at
// precision bf16) into the rounding that predicts them. At host precision fp32 it has no effect.
struct tt_plan {
    std::string name;
    tt_math     patch;      // patch embedding: fp32 im2col @ bf16 kernel + cls/pos
    tt_math     vit;        // backbone block matmuls (qkv, proj, fc1, fc2), LayerNorms, gelu
    tt_math     vit_sdpa;   // backbone attention
    bool        vit_residual_fp32 = false;  // residual stream (proj/fc2 + layerscale + residual outputs) in fp32
    tt_math     shaping;    // P @ X (0/1 row gather) + final LayerNorm
    tt_math     projector;  // C2f projector
    tt_math     scoring;    // two-stage enc_output -> LayerNorm -> class head -> max, ranked by topk_indices
    tt_math     decoder;    // everything after the top-k (and the proposal boxes)
    bool        weights_fp32 = false;  // weights and constants uploaded fp32 (a matmul reads them as tf32)
};

// Named plans (README "Precision" has the study): "device" (the default of --precision bf16 and of the ttnn
// engine: HiFi4 + fp32 accumulation, fp32 weights, fp32 backbone residual stream, fp32 two-stage scores ranked
// in fp32, other activations bf16 = "w32"); the study's "uniform", "port", "port-score32", "uniform-score32",
// "uniform-score32-res32", "w32"; the diagnostic bounds "act32" and "w32-act32" (every activation fp32, which
// the device kernels do not all take). Throws on an unknown name.
tt_plan                  tt_plan_named(const std::string & name);
std::vector<std::string> tt_plan_names();

class tt_graph {
  public:
    // Uploads every weight (bf16, transposed/fused as the device wants them) and the input-independent
    // tables, and allocates the persistent fp32 input [windows^2, window_seq, patch_k_pad] (Base [16,101,608]).
    // The checkpoint may be closed afterwards. Throws for a variant the graph does not build (multi-level).
    tt_graph(tt_ops & ops, const checkpoint & ck, const tt_plan & plan = tt_plan_named("device"));

    const tt_plan & plan() const { return plan_; }

    const tt_tensor & input() const { return input_; }

    struct outputs {
        tt_tensor logits;      // [1,Q,num_classes]
        tt_tensor pred_boxes;  // [1,Q,4]
        // Named intermediate tensors for per-stage checks (channels-last; names follow the goldens).
        std::map<std::string, tt_tensor> taps;
    };

    // Issues the whole device graph once, reading input(). Run eagerly or between trace begin/end.
    outputs build();

    // Test hook: select these Q token indices instead of the device top-k (the reference's own
    // selection, to compare the decoder per query when near-tied proposals swap). Empty = device top-k.
    // Returns true when the graph changes (override switched on or off: build() again / re-capture); new
    // indices for an override already in place are written into its tensor. Host implementation only.
    bool set_topk_override(const std::vector<int> & indices);

    int num_classes() const { return num_classes_; }
    int num_queries() const { return num_queries_; }
    // The RF-DETR Seg mask head, or nullptr for a detection checkpoint. Its traced part is issued by build().
    tt_mask_head * mask_head() const { return seg_.get(); }
    const tt_dims & dims() const { return dims_; }

  private:
    struct linear_w {
        tt_tensor w, b;
    };
    struct norm_w {
        tt_tensor w, b;
    };
    struct vit_layer {
        bool      global;
        norm_w    norm1, norm2;
        linear_w  qkv, proj, fc1, fc2;
        tt_tensor ls1, ls2;
    };
    struct dec_layer {
        linear_w  sa_qkv, sa_out, offsets, attn_w, value, out_proj, l1, l2;
        tt_tensor sa_pos_w;  // query_pos @ [Wq | Wk | 0]
        norm_w    norm1, norm2, norm3;
    };

    tt_tensor up(const std::vector<float> & data, const tt_shape & shape, tt_dtype dtype = TT_DTYPE_BF16);
    linear_w  up_linear(const checkpoint & ck, const std::string & prefix);
    norm_w    up_norm(const checkpoint & ck, const std::string & prefix);
    tt_tensor up_vec(const checkpoint & ck, const std::string & name);
    tt_tensor conv_ln_silu(const tt_tensor & x, const tt_tensor & conv_w, const norm_w & ln, int kernel);
    tt_tensor mlp3(const tt_tensor & x, const std::vector<linear_w> & layers);

    tt_ops &   ops_;
    tt_plan    plan_;
    model_arch arch_;
    tt_dims    dims_;
    int       num_classes_ = 0;
    int       num_queries_ = 0;
    tt_tensor input_;

    // backbone
    tt_tensor              patch_w_, cls_pos_, ones384_, perm_;
    std::vector<vit_layer> vit_;
    norm_w                 vit_final_;
    // projector
    tt_tensor           cv1_w_, cv2_w_;
    norm_w              cv1_ln_, cv2_ln_, out_ln_;
    std::vector<tt_tensor> m_w_;   // m.i.cv1, m.i.cv2 conv weights [128,128,3,3]
    std::vector<norm_w>    m_ln_;
    // two-stage
    linear_w              enc_output_, enc_class_;
    norm_w                enc_norm_;
    std::vector<linear_w> enc_bbox_;
    tt_tensor             prop_xy0_, prop_whd_, mask_xy_, t_xy0_, t_wh4_, refpoint_t_, target_;
    tt_tensor             topk_override_;
    // decoder
    tt_tensor              sine_t_, sine_even_, grid_xy2_, grid_wh_half_, grid_neg1_, ones256_, ones768_;
    std::vector<linear_w>  ref_head_;
    std::vector<dec_layer> dec_;
    norm_w                 dec_norm_;
    linear_w               class_embed_;
    std::vector<linear_w>  bbox_embed_;
    // mask head
    std::unique_ptr<tt_mask_head> seg_;
};

}  // namespace tt
}  // namespace rfdetr
