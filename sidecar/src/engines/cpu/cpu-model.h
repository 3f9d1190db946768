// RF-DETR forward on the CPU (../shared/MODEL.md is the map), sized by the checkpoint's variant (model_dims):
// weights read from a loaded checkpoint,
// every buffer sized once here, the linear layers' weights repacked once for the GEMM (gemm.h), a fixed
// thread pool splitting every GEMM and attention.
// The intermediate buffers are exposed read-only for the per-stage parity tests.
#pragma once

#include "engines/cpu/gemm.h"
#include "engines/cpu/precision.h"
#include "engines/cpu/seg-head.h"
#include "engines/cpu/thread-pool.h"
#include "model/checkpoint.h"
#include "model/schema.h"

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace rfdetr::cpu {

enum stage {
    STAGE_EMBED,      // patch embedding, position embeddings, window partition
    STAGE_VIT,        // ViT blocks up to the last tap and the four taps
    STAGE_PROJECTOR,  // C2f projector -> memory
    STAGE_TWO_STAGE,  // encoder heads, top-Q, reference points
    STAGE_DECODER,    // query_pos, the decoder layers
    STAGE_HEADS,      // final norm, class and box heads
    STAGE_COUNT,
};
const char * stage_str(stage s);

// The sizes of the loaded variant, from the checkpoint's schema architecture (model_arch). Base: 560 px,
// patch 14, grid 40, 4x4 windows of 10x10 (101 tokens with the cls copy, 1616 in all), ViT 384 wide with
// 6 heads and MLP 1536, blocks 0..10 run (taps after 1, 4, 7, 10; global 2, 5, 8), d_model 256, 3 decoder
// layers. Nano..Large: patch 16, 2x2 windows, all 12 blocks (taps after 2, 5, 8, 11; global 3, 6, 9).
// Detection: 300 queries. Seg: patch 12, 1x1 (SegNano) or 2x2 windows, 100 or 200 queries, 4-5 decoder
// layers, and the mask head (mask side = input / 4).
struct model_dims {
    int input = 0, patch = 0, patch_k = 0, grid = 0, pixels = 0;
    int win_per_side = 0, windows = 0, win_side = 0, win_tok = 0, tokens = 0;
    int vit_dim = 0, mlp_dim = 0, heads = 0, head_dim = 0, blocks = 0, pos_side = 0;
    int dim = 0, c2f_hidden = 0, dec_layers = 0, sa_heads = 0, sa_dim = 0, ca_heads = 0, ca_dim = 0, ca_points = 0, ffn = 0;
    int queries = 0;
    int mask_side = 0;  // 0: no mask head (a detection checkpoint)
    std::vector<int>  tap_blocks;  // the blocks whose outputs feed the projector, in tap order
    std::vector<bool> global;      // per block: attends over all windows
};
// Throws rfdetr::error for a variant this engine does not run (a multi-level projector).
model_dims dims_of(const model_arch & arch);

// The precision of the projector's convs in a model at precision p: p, except under int8, where they run in bf16 if
// a bf16 GEMM kernel runs (bf16_supported) and in fp32 if not: their int8 rounding was over half of int8's logit error.
precision projector_precision(precision p);

class model {
  public:
    // ckpt must outlive the model (the weights that are not repacked are read in place). int8: the weight
    // GEMMs of the patch embedding, the ViT blocks and the decoder layers run in int8 (qgemm.h), the projector's
    // convs in bf16 or fp32 (projector_precision); the two-stage and final heads, the reference-point head and
    // everything else stay float (the attention bf16 where bf16_attention(), the ViT's int8 where int8_attention()). bf16: those
    // GEMMs and the two-stage, reference-point and class/box heads' in bf16 (bgemm.h); the caller checks
    // bf16_supported() first.
    model(const checkpoint & ckpt, int threads, precision p = precision::fp32);

    // pixel_values f32 [3,S,S] (S = dims().input); logits [Q, num_classes]; boxes [Q, 4] (Q = dims().queries).
    void forward(const float * pixel_values, float * logits, float * boxes);
    // After forward(), a Seg checkpoint's mask logits for k queries: out[i] [M, M] (M = dims().mask_side) for
    // query queries[i] (indices < Q). k = 0 computes nothing (not even the query-independent spatial part).
    // Throws rfdetr::error on a detection checkpoint or an index out of range.
    void masks(const uint32_t * queries, int k, float * out);
    bool segmentation() const { return seg_ != nullptr; }
    // The mask head, for the per-stage tests (nullptr on a detection checkpoint).
    seg_head * mask_head() { return seg_.get(); }

    int num_classes() const { return nc_; }
    const model_dims & dims() const { return d_; }
    int threads() const { return pool_.size(); }
    precision prec() const { return prec_; }
    bool      int8() const { return prec_ == precision::int8; }
    // The precision of the projector's convs (projector_precision).
    precision projector_prec() const { return projector_prec_; }
    // The precision of the two-stage, reference-point and class/box heads: bf16 at bf16, the projector's at int8.
    precision heads_prec() const { return prec_ == precision::int8 ? projector_prec_ : prec_; }
    // Whether the attention runs in bf16 (attention-bf16.h): at bf16 and int8 where the bf16 kernel is AMX, or
    // AVX512-BF16 on an AMD core; at int8 the ViT's goes to int8 where int8_attention() (the decoder's stays bf16).
    bool bf16_attention() const { return bf16_attn_; }
    // Whether the ViT's attention runs in int8 (attention-int8.h): at int8 where the int8 GEMM's kernel is AVX-512
    // VNNI (no AMX), with or without a bf16 attention.
    bool int8_attention() const { return int8_attn_; }
    // Whether the window blocks run their qkv GEMM and attention window by window (vit_windows): where the windows
    // split evenly over the threads (with 16 windows and 3 threads one thread would run 6 of them while the others ran 5).
    bool windows_fused() const { return d_.windows % pool_.size() == 0; }

    // Test hook: use these Q token indices instead of the computed top-k (nullptr restores it).
    void set_topk_override(const int32_t * idx);

    // Intermediates of the last forward (see the fixture README for the reference meaning of each).
    const float *   pos_embed() const { return pos_embed_.data(); }          // [1601, 384]
    const float *   embeddings() const { return embeddings_.data(); }        // [1616, 384] windowed
    const float *   taps() const { return taps_.data(); }                    // [1600, 4*384] pixel-major
    const float *   memory() const { return memory_.data(); }                // [1600, 256]
    const float *   enc_class_logits() const { return enc_cls_.data(); }     // [1600, nc]
    const float *   enc_coords() const { return enc_coords_.data(); }        // [1600, 4]
    const int32_t * topk_indices() const { return topk_.data(); }            // [Q]
    const float *   reference_points() const { return ref_.data(); }       // [Q, 4]
    const float *   query_pos() const { return query_pos_.data(); }          // [Q, 256]
    const float *   layer_outputs() const { return layer_out_.data(); }      // [layers, Q, 256]
    const float *   hs() const { return hs_.data(); }                        // [Q, 256]
    const double *  stage_ms() const { return stage_ms_; }                   // [STAGE_COUNT] of the last forward

  private:
    struct vit_block {
        packed_weight qkv, proj, fc1, fc2;  // qkv fused: [1152, 384]
        std::vector<float> qkv_b;
        const float *      ln1_g, *ln1_b, *proj_b, *ls1, *ln2_g, *ln2_b, *fc1_b, *fc2_b, *ls2;
        bool               global;
    };
    struct convx {
        packed_weight w;
        const float * g, *b;
    };
    struct dec_layer {
        packed_weight in_qk, in_v, out, off, aw, outp, l1, l2;
        const float * in_b, *out_b, *n1_g, *n1_b, *off_b, *aw_b, *outp_b, *l1_b, *l2_b, *n2_g, *n2_b, *n3_g, *n3_b;
    };

    const float * w(const std::string & name) const;
    // The checkpoint's weight `name` ([n, ...] with k = the rest) packed for gemm_packed, rows [r0, r0 + n);
    // a row-concatenation of same-width weights packed as one (the fused GEMMs). Both track kmax_; p: the form
    // (pack_weight_as).
    packed_weight packed(const std::string & name, int r0 = 0, int n = -1, precision p = precision::fp32);
    packed_weight pack_concat(const std::vector<const float *> & parts, int n_each, int k, precision p = precision::fp32);
    int           row_parts(int m) const;
    int           mlp_chunk_rows(int rows) const;
    static void   row_range(int m, int parts, int p, int & r0, int & r1);
    float *       gemm_scratch(int thread) { return gemm_scratch_.data() + gemm_scratch_stride_ * thread; }
    float *       att_scratch(int thread) { return att_scratch_.data() + att_scratch_stride_ * thread; }
    // Floats of one head's packed keys and values in the global blocks, for the attention that runs.
    size_t        global_kv_floats() const;
    // c[m, n] (ldc) = e(LN?(a)[m, k] (lda) * W^T), rows split over the pool; post(row0, rows) runs per part.
    template <class E>
    void linear(const float * a, int lda, int m, const packed_weight & wt, float * c, int ldc, const epilogue & e,
                E post, const a_layernorm * ln = nullptr);
    void linear(const float * a, int lda, int m, const packed_weight & wt, float * c, int ldc, const epilogue & e);

    void build_mask_head();
    void run_embed(const float * px);
    void run_vit();
    template <class T>
    void vit_attention(const T * qkv, T * ctx, bool global, float scale);
    template <class T>
    void window_head(const T * q, T * o, float scale, int thread);  // one head of one window: q's k and v follow at +dim
    void vit_windows(const vit_block & blk, const a_layernorm & ln1, float scale);
    void run_projector();
    void run_two_stage();
    void run_decoder();
    void run_heads(float * logits, float * boxes);

    const checkpoint & ckpt_;
    precision          prec_;
    precision          projector_prec_;
    bool               bf16_attn_;  // the attention in bf16 (attention-bf16.h): bf16 or int8 with AMX-BF16, or AVX512-BF16 on AMD
    bool               int8_attn_ = false;  // the ViT's attention in int8 (attention-int8.h; attention_in_int8)
    thread_pool        pool_;
    int                nc_;
    model_dims         d_;

    // weights
    packed_weight          patch_w_;
    const float *          patch_b_, *final_ln_g_, *final_ln_b_;
    std::vector<vit_block> blocks_;
    convx                  cv1_, cv2_, m_[3][2];
    const float *          proj_ln_g_, *proj_ln_b_;
    packed_weight          enc_w_, enc_cls_w_, enc_box_w_[3];
    const float *          enc_b_, *enc_ln_g_, *enc_ln_b_, *enc_cls_b_, *enc_box_b_[3];
    packed_weight          rph_w_[2];
    const float *          rph_b_[2], *query_feat_, *refpoint_;
    std::vector<dec_layer> dec_;
    packed_weight          value_w_;  // the 3 layers' value_proj fused: [768, 256]
    std::vector<float>     value_b_;
    packed_weight          cls_w_, box_w_[3];
    const float *          dec_norm_g_, *dec_norm_b_, *cls_b_, *box_b_[3];

    // buffers
    std::vector<float>   pos_embed_, cols_, embeddings_, x_, h_, qkv_, ctx_, mlp_, taps_;
    // What AMX tiles read in place, on cache lines (gemm.h's cache_line_allocator): a 64-byte tile row that straddles
    // two lines loads at 0.6-0.7x the rate. bf16 rows with the bf16 attention: q, k, v and its output, else empty;
    // the MLP's hidden rows at bf16 (bgemm.h's hand-off), else empty; the attention's per-thread scratch; a global
    // block's keys and values, packed per head.
    template <class T> using lines = std::vector<T, cache_line_allocator<T>>;
    lines<uint16_t>      qkv_b_, ctx_b_, mlp_b_;
    lines<float>         att_scratch_, keys_;
    std::vector<float>   gemm_scratch_;  // per thread: gemm_scratch_stride_ floats
    size_t               att_scratch_stride_ = 0;
    size_t               gemm_scratch_stride_ = 0;
    int                  kmax_                = 0;  // deepest reduction of the packed weights
    std::vector<float>   cat_, im2col_, t128_, y256_, memory_;
    std::vector<float>   mem2_, enc_cls_, enc_h1_, enc_h2_, enc_delta_, enc_coords_, scores_;
    std::vector<int32_t> topk_, topk_scratch_;
    std::vector<float>   ref_, sine_, qp_h_, query_pos_, tgt_, qin_, qk_, v_, attn_, tmp_, off_, aw_, samp_,
        ffn_, value_, layer_out_, hs_, head_h1_, head_h2_, head_delta_;
    bool                 topk_override_ = false;
    std::vector<int32_t> topk_forced_;
    double               stage_ms_[STAGE_COUNT] = {};
    std::unique_ptr<seg_head> seg_;
};

}  // namespace rfdetr::cpu
