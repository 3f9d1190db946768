// RF-DETR-base forward on the CPU (../shared/MODEL.md is the map): weights read from a loaded checkpoint,
// every buffer sized once here, a fixed thread pool, single-threaded BLAS inside its tasks.
// The intermediate buffers are exposed read-only for the per-stage parity tests.
#pragma once

#include "engines/cpu/thread-pool.h"
#include "model/checkpoint.h"

#include <cstdint>
#include <string>
#include <vector>

namespace rfdetr::cpu {

enum stage {
    STAGE_EMBED,      // patch embedding, position embeddings, window partition
    STAGE_VIT,        // ViT blocks 0..10 and the four taps
    STAGE_PROJECTOR,  // C2f projector -> memory
    STAGE_TWO_STAGE,  // encoder heads, top-300, reference points
    STAGE_DECODER,    // query_pos, 3 decoder layers
    STAGE_HEADS,      // final norm, class and box heads
    STAGE_COUNT,
};
const char * stage_str(stage s);

// Geometry of RF-DETR-base at 560x560.
constexpr int k_input_size = 560;              // pixel_values [3,560,560]
constexpr int k_grid     = 40;                 // patches per side
constexpr int k_pixels   = k_grid * k_grid;    // 1600
constexpr int k_windows  = 16;                 // 4x4
constexpr int k_win_side = 10;                 // patches per window side
constexpr int k_win_tok  = 101;                // cls + 100
constexpr int k_tokens   = k_windows * k_win_tok;  // 1616
constexpr int k_vit_dim  = 384;
constexpr int k_mlp_dim  = 1536;
constexpr int k_vit_blocks_used = 11;          // block 11 is computed upstream but never read
constexpr int k_dim      = 256;
constexpr int k_queries  = 300;
constexpr int k_dec_layers = 3;

class model {
  public:
    // ckpt must outlive the model (the weights that are not repacked are read in place).
    model(const checkpoint & ckpt, int threads);

    // pixel_values f32 [3,560,560]; logits [300, num_classes]; boxes [300, 4].
    void forward(const float * pixel_values, float * logits, float * boxes);

    int num_classes() const { return nc_; }
    int threads() const { return pool_.size(); }

    // Test hook: use these 300 token indices instead of the computed top-k (nullptr restores it).
    void set_topk_override(const int32_t * idx);

    // Intermediates of the last forward (see the fixture README for the reference meaning of each).
    const float *   pos_embed() const { return pos_embed_.data(); }          // [1601, 384]
    const float *   embeddings() const { return embeddings_.data(); }        // [1616, 384] windowed
    const float *   taps() const { return taps_.data(); }                    // [1600, 4*384] pixel-major
    const float *   memory() const { return memory_.data(); }                // [1600, 256]
    const float *   enc_class_logits() const { return enc_cls_.data(); }     // [1600, nc]
    const float *   enc_coords() const { return enc_coords_.data(); }        // [1600, 4]
    const int32_t * topk_indices() const { return topk_.data(); }            // [300]
    const float *   reference_points() const { return ref_.data(); }       // [300, 4]
    const float *   query_pos() const { return query_pos_.data(); }          // [300, 256]
    const float *   layer_outputs() const { return layer_out_.data(); }      // [3, 300, 256]
    const float *   hs() const { return hs_.data(); }                        // [300, 256]
    const double *  stage_ms() const { return stage_ms_; }                   // [STAGE_COUNT]

  private:
    struct vit_block {
        std::vector<float> qkv_w, qkv_b;  // fused [1152, 384], [1152]
        const float *      ln1_g, *ln1_b, *proj_w, *proj_b, *ls1, *ln2_g, *ln2_b, *fc1_w, *fc1_b, *fc2_w, *fc2_b, *ls2;
        bool               global;
    };
    struct convx {
        const float *w, *g, *b;
    };
    struct dec_layer {
        const float *in_w, *in_b, *out_w, *out_b, *n1_g, *n1_b, *off_w, *off_b, *aw_w, *aw_b, *outp_w, *outp_b,
            *l1_w, *l1_b, *l2_w, *l2_b, *n2_g, *n2_b, *n3_g, *n3_b;
    };

    const float * w(const std::string & name) const;
    int           row_parts(int m) const;
    static void   row_range(int m, int parts, int p, int & r0, int & r1);
    // c[m, n] (ldc) = a[m, k] (lda) * wt[n, k]^T, rows split over the pool; epi(row0, rows) runs per part.
    template <class E>
    void linear(const float * a, int lda, int m, const float * wt, int n, int k, float * c, int ldc, E epi);
    void linear(const float * a, int lda, int m, const float * wt, const float * bias, int n, int k, float * c,
                int ldc);

    void run_embed(const float * px);
    void run_vit();
    void run_projector();
    void run_two_stage();
    void run_decoder();
    void run_heads(float * logits, float * boxes);

    const checkpoint & ckpt_;
    thread_pool        pool_;
    int                nc_;

    // weights
    const float *          patch_w_, *patch_b_, *final_ln_g_, *final_ln_b_;
    std::vector<vit_block> blocks_;
    convx                  cv1_, cv2_, m_[3][2];
    const float *          proj_ln_g_, *proj_ln_b_;
    const float *enc_w_, *enc_b_, *enc_ln_g_, *enc_ln_b_, *enc_cls_w_, *enc_cls_b_, *enc_box_w_[3], *enc_box_b_[3];
    const float *rph_w_[2], *rph_b_[2], *query_feat_, *refpoint_;
    std::vector<dec_layer> dec_;
    std::vector<float>     value_w_, value_b_;  // the 3 layers' value_proj fused: [768, 256]
    const float *          dec_norm_g_, *dec_norm_b_, *cls_w_, *cls_b_, *box_w_[3], *box_b_[3];

    // buffers
    std::vector<float>   pos_embed_, cols_, embeddings_, x_, h_, qkv_, ctx_, mlp_, att_scratch_, taps_;
    std::vector<float>   cat_, im2col_, t128_, y256_, memory_;
    std::vector<float>   mem2_, enc_cls_, enc_h1_, enc_h2_, enc_delta_, enc_coords_, scores_;
    std::vector<int32_t> topk_, topk_scratch_;
    std::vector<float>   ref_, sine_, qp_h_, query_pos_, tgt_, qin_, qk_, v_, attn_, tmp_, off_, aw_, samp_,
        ffn_, value_, layer_out_, hs_, head_h1_, head_h2_, head_delta_;
    bool                 topk_override_ = false;
    std::vector<int32_t> topk_forced_;
    double               stage_ms_[STAGE_COUNT] = {};
};

}  // namespace rfdetr::cpu
