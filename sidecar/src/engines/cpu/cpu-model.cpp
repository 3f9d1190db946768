#include "engines/cpu/cpu-model.h"

#include "engines/cpu/attention.h"
#include "engines/cpu/kernels.h"
#include "engines/engine.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>

namespace rfdetr::cpu {

const char * stage_str(stage s) {
    switch (s) {
        case STAGE_EMBED: return "embed";
        case STAGE_VIT: return "vit";
        case STAGE_PROJECTOR: return "projector";
        case STAGE_TWO_STAGE: return "two_stage";
        case STAGE_DECODER: return "decoder";
        case STAGE_HEADS: return "heads";
        case STAGE_COUNT: break;
    }
    return "?";
}

namespace {

constexpr int   k_patch      = 14;
constexpr int   k_patch_k    = 3 * k_patch * k_patch;  // 588
constexpr int   k_heads      = 6;
constexpr int   k_head_dim   = 64;
constexpr int   k_pos_side   = 37;
constexpr float k_eps_vit    = 1e-6f;
constexpr float k_eps_dec    = 1e-5f;
constexpr int   k_sa_heads   = 8;
constexpr int   k_sa_dim     = 32;
constexpr int   k_ca_heads   = 16;
constexpr int   k_ca_dim     = 16;
constexpr int   k_ca_points  = 2;
constexpr int   k_ffn        = 2048;
constexpr int   k_c2f_hidden = 128;
constexpr int   k_taps[4]    = {1, 4, 7, 10};  // blocks whose outputs feed the projector

const std::string k_vit = "backbone.0.encoder.encoder.";
const std::string k_prj = "backbone.0.projector.stages.0.";

double now_ms() {
    return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

size_t sz(int a, int b) { return static_cast<size_t>(a) * static_cast<size_t>(b); }

}  // namespace

const float * model::w(const std::string & name) const { return ckpt_.get(name).data; }

packed_weight model::packed(const std::string & name, int r0, int n) {
    const tensor_view & t = ckpt_.get(name);
    const int           rows = static_cast<int>(t.shape[0]);
    int64_t             k    = 1;
    for (size_t i = 1; i < t.shape.size(); ++i) k *= t.shape[i];
    kmax_ = std::max(kmax_, static_cast<int>(k));
    return pack_weight(t.data + static_cast<size_t>(r0) * k, n < 0 ? rows - r0 : n, static_cast<int>(k), static_cast<int>(k));
}

packed_weight model::pack_concat(const std::vector<const float *> & parts, int n_each, int k) {
    std::vector<float> cat(sz(static_cast<int>(parts.size()) * n_each, k));
    for (size_t i = 0; i < parts.size(); ++i) std::memcpy(cat.data() + i * sz(n_each, k), parts[i], sz(n_each, k) * 4);
    kmax_ = std::max(kmax_, k);
    return pack_weight(cat.data(), static_cast<int>(parts.size()) * n_each, k, k);
}

model::model(const checkpoint & ckpt, int threads) : ckpt_(ckpt), pool_(threads), nc_(ckpt.num_classes()) {
    // ViT
    patch_w_ = packed(k_vit + "embeddings.patch_embeddings.projection.weight");
    patch_b_ = w(k_vit + "embeddings.patch_embeddings.projection.bias");
    for (int b = 0; b < k_vit_blocks_used; ++b) {
        const std::string p = k_vit + "encoder.layer." + std::to_string(b) + ".";
        vit_block         blk;
        std::vector<const float *> qkv_parts;
        blk.qkv_b.resize(3 * k_vit_dim);
        const char * parts[3] = {"query", "key", "value"};
        for (int i = 0; i < 3; ++i) {
            const std::string a = p + "attention.attention." + parts[i];
            qkv_parts.push_back(w(a + ".weight"));
            std::memcpy(blk.qkv_b.data() + i * k_vit_dim, w(a + ".bias"), k_vit_dim * 4);
        }
        blk.qkv    = pack_concat(qkv_parts, k_vit_dim, k_vit_dim);
        blk.ln1_g  = w(p + "norm1.weight");
        blk.ln1_b  = w(p + "norm1.bias");
        blk.proj   = packed(p + "attention.output.dense.weight");
        blk.proj_b = w(p + "attention.output.dense.bias");
        blk.ls1    = w(p + "layer_scale1.lambda1");
        blk.ln2_g  = w(p + "norm2.weight");
        blk.ln2_b  = w(p + "norm2.bias");
        blk.fc1    = packed(p + "mlp.fc1.weight");
        blk.fc1_b  = w(p + "mlp.fc1.bias");
        blk.fc2    = packed(p + "mlp.fc2.weight");
        blk.fc2_b  = w(p + "mlp.fc2.bias");
        blk.ls2    = w(p + "layer_scale2.lambda1");
        blk.global = b == 2 || b == 5 || b == 8;
        blocks_.push_back(std::move(blk));
    }
    final_ln_g_ = w(k_vit + "layernorm.weight");
    final_ln_b_ = w(k_vit + "layernorm.bias");

    // Position embeddings are input-independent: cls row as is, the 37x37 grid resized to 40x40 once.
    {
        const float * pos = w(k_vit + "embeddings.position_embeddings");
        pos_embed_.resize(sz(1 + k_pixels, k_vit_dim));
        std::memcpy(pos_embed_.data(), pos, k_vit_dim * 4);
        std::vector<float> scratch(sz(k_pos_side * k_grid, k_vit_dim));
        resize_bicubic_aa(pos + k_vit_dim, k_pos_side, k_pos_side, k_vit_dim, pos_embed_.data() + k_vit_dim, k_grid,
                          k_grid, scratch.data());
        // cls token + its position embedding, the same in every window.
        const float * cls = w(k_vit + "embeddings.cls_token");
        for (int c = 0; c < k_vit_dim; ++c) pos_embed_[c] = cls[c] + pos_embed_[c];
    }

    // Projector
    auto cx = [&](const std::string & p) { return convx{packed(p + ".conv.weight"), w(p + ".bn.weight"), w(p + ".bn.bias")}; };
    cv1_ = cx(k_prj + "0.cv1");
    cv2_ = cx(k_prj + "0.cv2");
    for (int i = 0; i < 3; ++i) {
        m_[i][0] = cx(k_prj + "0.m." + std::to_string(i) + ".cv1");
        m_[i][1] = cx(k_prj + "0.m." + std::to_string(i) + ".cv2");
    }
    proj_ln_g_ = w(k_prj + "1.weight");
    proj_ln_b_ = w(k_prj + "1.bias");

    // Two-stage (group 0) and decoder
    enc_w_     = packed("transformer.enc_output.0.weight");
    enc_b_     = w("transformer.enc_output.0.bias");
    enc_ln_g_  = w("transformer.enc_output_norm.0.weight");
    enc_ln_b_  = w("transformer.enc_output_norm.0.bias");
    enc_cls_w_ = packed("transformer.enc_out_class_embed.0.weight");
    enc_cls_b_ = w("transformer.enc_out_class_embed.0.bias");
    for (int i = 0; i < 3; ++i) {
        const std::string p = "transformer.enc_out_bbox_embed.0.layers." + std::to_string(i);
        enc_box_w_[i]       = packed(p + ".weight");
        enc_box_b_[i]       = w(p + ".bias");
        const std::string q = "bbox_embed.layers." + std::to_string(i);
        box_w_[i]           = packed(q + ".weight");
        box_b_[i]           = w(q + ".bias");
    }
    for (int i = 0; i < 2; ++i) {
        const std::string p = "transformer.decoder.ref_point_head.layers." + std::to_string(i);
        rph_w_[i]           = packed(p + ".weight");
        rph_b_[i]           = w(p + ".bias");
    }
    query_feat_ = w("query_feat.weight");
    refpoint_   = w("refpoint_embed.weight");
    std::vector<const float *> value_parts;
    value_b_.resize(k_dec_layers * k_dim);
    for (int l = 0; l < k_dec_layers; ++l) {
        const std::string p = "transformer.decoder.layers." + std::to_string(l) + ".";
        dec_layer         d;
        d.in_qk  = packed(p + "self_attn.in_proj_weight", 0, 2 * k_dim);
        d.in_v   = packed(p + "self_attn.in_proj_weight", 2 * k_dim, k_dim);
        d.in_b   = w(p + "self_attn.in_proj_bias");
        d.out    = packed(p + "self_attn.out_proj.weight");
        d.out_b  = w(p + "self_attn.out_proj.bias");
        d.n1_g   = w(p + "norm1.weight");
        d.n1_b   = w(p + "norm1.bias");
        d.off    = packed(p + "cross_attn.sampling_offsets.weight");
        d.off_b  = w(p + "cross_attn.sampling_offsets.bias");
        d.aw     = packed(p + "cross_attn.attention_weights.weight");
        d.aw_b   = w(p + "cross_attn.attention_weights.bias");
        d.outp   = packed(p + "cross_attn.output_proj.weight");
        d.outp_b = w(p + "cross_attn.output_proj.bias");
        d.l1     = packed(p + "linear1.weight");
        d.l1_b   = w(p + "linear1.bias");
        d.l2     = packed(p + "linear2.weight");
        d.l2_b   = w(p + "linear2.bias");
        d.n2_g   = w(p + "norm2.weight");
        d.n2_b   = w(p + "norm2.bias");
        d.n3_g   = w(p + "norm3.weight");
        d.n3_b   = w(p + "norm3.bias");
        dec_.push_back(std::move(d));
        value_parts.push_back(w(p + "cross_attn.value_proj.weight"));
        std::memcpy(value_b_.data() + l * k_dim, w(p + "cross_attn.value_proj.bias"), k_dim * 4);
    }
    value_w_    = pack_concat(value_parts, k_dim, k_dim);
    dec_norm_g_ = w("transformer.decoder.norm.weight");
    dec_norm_b_ = w("transformer.decoder.norm.bias");
    cls_w_      = packed("class_embed.weight");
    cls_b_      = w("class_embed.bias");

    // GEMM scratch per thread, for the deepest reduction of any packed weight.
    gemm_scratch_stride_ = (gemm_scratch_floats(kmax_) + 15) & ~static_cast<size_t>(15);
    gemm_scratch_.resize(gemm_scratch_stride_ * pool_.size());

    // Buffers, sized once.
    cols_.resize(sz(k_pixels, k_patch_k));
    embeddings_.resize(sz(k_tokens, k_vit_dim));
    x_.resize(sz(k_tokens, k_vit_dim));
    h_.resize(sz(k_tokens, k_vit_dim));
    qkv_.resize(sz(k_tokens, 3 * k_vit_dim));
    ctx_.resize(sz(k_tokens, k_vit_dim));
    mlp_.resize(sz(k_tokens, k_mlp_dim));
    // Attention scratch per thread: the largest of a window head (its keys packed in place), a global
    // query block, and a decoder head.
    att_scratch_stride_ = std::max({attention_head_scratch_floats(k_win_tok, k_head_dim),
                                    attention_scratch_floats(k_attention_block, k_head_dim),
                                    attention_head_scratch_floats(k_queries, k_sa_dim)});
    att_scratch_stride_ = (att_scratch_stride_ + 15) & ~static_cast<size_t>(15);
    att_scratch_.resize(att_scratch_stride_ * pool_.size());
    keys_.resize(attention_keys_floats(k_tokens, k_head_dim) * k_heads);
    taps_.resize(sz(k_pixels, 4 * k_vit_dim));
    cat_.resize(sz(k_pixels, 5 * k_c2f_hidden));
    im2col_.resize(sz(k_pixels, 9 * k_c2f_hidden));
    t128_.resize(sz(k_pixels, k_c2f_hidden));
    y256_.resize(sz(k_pixels, k_dim));
    memory_.resize(sz(k_pixels, k_dim));
    mem2_.resize(sz(k_pixels, k_dim));
    enc_cls_.resize(sz(k_pixels, nc_));
    enc_h1_.resize(sz(k_pixels, k_dim));
    enc_h2_.resize(sz(k_pixels, k_dim));
    enc_delta_.resize(sz(k_pixels, 4));
    enc_coords_.resize(sz(k_pixels, 4));
    scores_.resize(k_pixels);
    topk_.resize(k_queries);
    topk_scratch_.resize(k_pixels);
    topk_forced_.resize(k_queries);
    ref_.resize(sz(k_queries, 4));
    sine_.resize(sz(k_queries, 2 * k_dim));
    qp_h_.resize(sz(k_queries, k_dim));
    query_pos_.resize(sz(k_queries, k_dim));
    tgt_.resize(sz(k_queries, k_dim));
    qin_.resize(sz(k_queries, k_dim));
    qk_.resize(sz(k_queries, 2 * k_dim));
    v_.resize(sz(k_queries, k_dim));
    attn_.resize(sz(k_queries, k_dim));
    tmp_.resize(sz(k_queries, k_dim));
    off_.resize(sz(k_queries, k_ca_heads * k_ca_points * 2));
    aw_.resize(sz(k_queries, k_ca_heads * k_ca_points));
    samp_.resize(sz(k_queries, k_dim));
    ffn_.resize(sz(k_queries, k_ffn));
    value_.resize(sz(k_pixels, k_dec_layers * k_dim));
    layer_out_.resize(sz(k_dec_layers * k_queries, k_dim));
    hs_.resize(sz(k_queries, k_dim));
    head_h1_.resize(sz(k_queries, k_dim));
    head_h2_.resize(sz(k_queries, k_dim));
    head_delta_.resize(sz(k_queries, 4));
}

void model::set_topk_override(const int32_t * idx) {
    topk_override_ = idx != nullptr;
    if (idx) std::copy(idx, idx + k_queries, topk_forced_.begin());
}

// Row parts of an m-row GEMM: four per thread (taken dynamically), whole micro-tiles of gemm_mr() rows,
// at least two tiles each. Smaller parts cost the GEMM nothing here: gemm_packed streams the weight once
// per row block of at most 252 rows anyway (gemm.cpp), so 8 parts of 202 rows read it as often as 4 of
// 404; and a thread the scheduler preempts holds up a quarter of what it held with 2 parts per thread.
int model::row_parts(int m) const { return std::min(4 * pool_.size(), std::max(1, m / (2 * gemm_mr()))); }

void model::row_range(int m, int parts, int p, int & r0, int & r1) {
    const int mr = gemm_mr();
    r0           = m * p / parts / mr * mr;
    r1           = p + 1 == parts ? m : m * (p + 1) / parts / mr * mr;
}

template <class E>
void model::linear(const float * a, int lda, int m, const packed_weight & wt, float * c, int ldc, const epilogue & e,
                   E post, const a_layernorm * ln) {
    const int parts = row_parts(m);
    pool_.parallel_for(parts, [&](int p, int thread) {
        int r0, r1;
        row_range(m, parts, p, r0, r1);
        gemm_packed(r1 - r0, a + sz(r0, lda), lda, wt, c + sz(r0, ldc), ldc, e, gemm_scratch(thread), ln);
        post(r0, r1 - r0);
    });
}

void model::linear(const float * a, int lda, int m, const packed_weight & wt, float * c, int ldc, const epilogue & e) {
    linear(a, lda, m, wt, c, ldc, e, [](int, int) {});
}

namespace {

epilogue with_bias(epi kind, const float * bias, const float * scale = nullptr) {
    epilogue e;
    e.kind  = kind;
    e.bias  = bias;
    e.scale = scale;
    return e;
}

}  // namespace

void model::run_embed(const float * px) {
    // Patch embedding as one GEMM over im2col rows (column c*196 + ky*14 + kx, the conv weight's order).
    pool_.parallel_for(k_grid, [&](int py, int) {
        for (int pxi = 0; pxi < k_grid; ++pxi) {
            float * row = cols_.data() + sz(py * k_grid + pxi, k_patch_k);
            for (int c = 0; c < 3; ++c) {
                for (int ky = 0; ky < k_patch; ++ky) {
                    const float * src = px + (sz(c, k_input_size) + py * k_patch + ky) * k_input_size + pxi * k_patch;
                    std::memcpy(row + (c * k_patch + ky) * k_patch, src, k_patch * 4);
                }
            }
        }
    });
    // Conv output (+bias), then + position embedding, scattered into window order (wy, wx, py, px).
    float * patches = h_.data();  // [1600, 384] scratch
    linear(cols_.data(), k_patch_k, k_pixels, patch_w_, patches, k_vit_dim, with_bias(epi::bias, patch_b_));
    pool_.parallel_for(k_windows, [&](int win, int) {
        const int wy = win / 4, wx = win % 4;
        float *   dst = x_.data() + sz(win * k_win_tok, k_vit_dim);
        std::memcpy(dst, pos_embed_.data(), k_vit_dim * 4);
        for (int t = 0; t < k_win_side * k_win_side; ++t) {
            const int     pix = (wy * k_win_side + t / k_win_side) * k_grid + wx * k_win_side + t % k_win_side;
            const float * p   = patches + sz(pix, k_vit_dim);
            const float * pe  = pos_embed_.data() + sz(1 + pix, k_vit_dim);
            float *       o   = dst + sz(1 + t, k_vit_dim);
            for (int c = 0; c < k_vit_dim; ++c) o[c] = p[c] + pe[c];
        }
    });
    std::memcpy(embeddings_.data(), x_.data(), embeddings_.size() * 4);
}

void model::run_vit() {
    const int tap_lds = 4 * k_vit_dim;
    for (int b = 0; b < k_vit_blocks_used; ++b) {
        const vit_block & blk = blocks_[b];
        // qkv = LN1(x) Wqkv^T + b (one fused GEMM, the LayerNorm applied as its rows are packed).
        const int      parts = row_parts(k_tokens);
        const a_layernorm ln1{blk.ln1_g, blk.ln1_b, k_eps_vit};
        linear(x_.data(), k_vit_dim, k_tokens, blk.qkv, qkv_.data(), 3 * k_vit_dim, with_bias(epi::bias, blk.qkv_b.data()),
               [](int, int) {}, &ln1);
        // Attention: softmax(q k^T / 8) v per head, fused (attention.h); windows of 101 tokens, one task per
        // (window, head), or all 1616 in the global blocks: each head's keys packed once, then one task
        // per (head, 64-query block).
        const int ld = 3 * k_vit_dim;
        if (blk.global) {
            const size_t kfl = attention_keys_floats(k_tokens, k_head_dim);
            pool_.parallel_for(k_heads, [&](int hd, int) {
                attention_pack_keys(qkv_.data() + k_vit_dim + hd * k_head_dim, ld, k_tokens, k_head_dim,
                                    keys_.data() + kfl * hd);
            });
            const int qblocks = (k_tokens + k_attention_block - 1) / k_attention_block;
            pool_.parallel_for(k_heads * qblocks, [&](int task, int thread) {
                const int hd = task / qblocks, q0 = (task % qblocks) * k_attention_block;
                const int nq = std::min(k_attention_block, k_tokens - q0);
                attention_block(qkv_.data() + sz(q0, ld) + hd * k_head_dim, ld, keys_.data() + kfl * hd, k_tokens,
                                qkv_.data() + 2 * k_vit_dim + hd * k_head_dim, ld,
                                ctx_.data() + sz(q0, k_vit_dim) + hd * k_head_dim, k_vit_dim, nq, k_head_dim, 0.125f,
                                att_scratch(thread));
            });
        } else {
            pool_.parallel_for(k_windows * k_heads, [&](int task, int thread) {
                const int     win = task / k_heads, hd = task % k_heads;
                const float * base = qkv_.data() + sz(win * k_win_tok, ld) + hd * k_head_dim;
                attention_head(base, ld, base + k_vit_dim, ld, base + 2 * k_vit_dim, ld,
                               ctx_.data() + sz(win * k_win_tok, k_vit_dim) + hd * k_head_dim, k_vit_dim, k_win_tok,
                               k_win_tok, k_head_dim, 0.125f, att_scratch(thread));
            });
        }
        // Projection with x = (y + b) * ls1 + x in its epilogue (the reference's order); then the MLP:
        // fc1 on LN2(x) (LayerNorm in the A pass) with bias + GELU in the epilogue, fc2 with the second
        // LayerScale + residual. One row part per task, each activation read and written once.
        const a_layernorm ln2{blk.ln2_g, blk.ln2_b, k_eps_vit};
        pool_.parallel_for(parts, [&](int p, int thread) {
            int r0, r1;
            row_range(k_tokens, parts, p, r0, r1);
            const int rows = r1 - r0;
            float *   x    = x_.data() + sz(r0, k_vit_dim);
            float *   hid  = mlp_.data() + sz(r0, k_mlp_dim);
            float *   scr  = gemm_scratch(thread);
            gemm_packed(rows, ctx_.data() + sz(r0, k_vit_dim), k_vit_dim, blk.proj, x, k_vit_dim,
                        with_bias(epi::bias_scale_add, blk.proj_b, blk.ls1), scr);
            gemm_packed(rows, x, k_vit_dim, blk.fc1, hid, k_mlp_dim, with_bias(epi::bias_gelu, blk.fc1_b), scr, &ln2);
            gemm_packed(rows, hid, k_mlp_dim, blk.fc2, x, k_vit_dim, with_bias(epi::bias_scale_add, blk.fc2_b, blk.ls2),
                        scr);
        });
        // Taps: outputs of blocks 1, 4, 7, 10 through the final LayerNorm, cls dropped, un-windowed.
        for (int t = 0; t < 4; ++t) {
            if (k_taps[t] != b) continue;
            pool_.parallel_for(k_windows, [&](int win, int) {
                const int wy = win / 4, wx = win % 4;
                for (int tok = 0; tok < k_win_side * k_win_side; ++tok) {
                    const int pix = (wy * k_win_side + tok / k_win_side) * k_grid + wx * k_win_side + tok % k_win_side;
                    layernorm(x_.data() + sz(win * k_win_tok + 1 + tok, k_vit_dim), k_vit_dim,
                              taps_.data() + sz(pix, tap_lds) + t * k_vit_dim, tap_lds, 1, k_vit_dim, final_ln_g_,
                              final_ln_b_, k_eps_vit);
                }
            });
        }
    }
}

void model::run_projector() {
    const int ldc = 5 * k_c2f_hidden;  // cat[y0, y1, m0, m1, m2]
    // ConvX epilogue: channels-first LayerNorm (eps 1e-6) then SiLU, in place.
    auto ln_silu = [&](float * y, int ld, int r0, int rows, int n, const convx & cv) {
        layernorm(y + sz(r0, ld), ld, y + sz(r0, ld), ld, rows, n, cv.g, cv.b, k_eps_vit);
        silu(y + sz(r0, ld), ld, rows, n);
    };
    // cv1: 1x1 1536 -> 256 into cat columns 0..255.
    linear(taps_.data(), 4 * k_vit_dim, k_pixels, cv1_.w, cat_.data(), ldc, epilogue{},
           [&](int r0, int rows) { ln_silu(cat_.data(), ldc, r0, rows, k_dim, cv1_); });
    // Three bottlenecks (two 3x3 convs each, no shortcut), chained from y1; outputs at cat columns 256, 384, 512.
    const int k9 = 9 * k_c2f_hidden;
    for (int i = 0; i < 3; ++i) {
        const float * in  = cat_.data() + (1 + i) * k_c2f_hidden;
        float *       out = cat_.data() + (2 + i) * k_c2f_hidden;
        for (int j = 0; j < 2; ++j) {
            const float * src   = j == 0 ? in : t128_.data();
            const int     ldsrc = j == 0 ? ldc : k_c2f_hidden;
            float *       dst   = j == 0 ? t128_.data() : out;
            const int     lddst = j == 0 ? k_c2f_hidden : ldc;
            const convx & cv    = m_[i][j];
            const int     parts = std::min(4 * pool_.size(), k_grid);  // image row bands, as row_parts
            pool_.parallel_for(parts, [&](int p, int thread) {
                const int y0 = k_grid * p / parts, y1 = k_grid * (p + 1) / parts;
                im2col_3x3(src, ldsrc, k_grid, k_grid, k_c2f_hidden, im2col_.data(), y0, y1);
                const int r0 = y0 * k_grid, rows = (y1 - y0) * k_grid;
                gemm_packed(rows, im2col_.data() + sz(r0, k9), k9, cv.w, dst + sz(r0, lddst), lddst, epilogue{},
                            gemm_scratch(thread));
                ln_silu(dst, lddst, r0, rows, k_c2f_hidden, cv);
            });
        }
    }
    // cv2: 1x1 640 -> 256, then the projector's final LayerNorm (no activation) -> memory.
    linear(cat_.data(), ldc, k_pixels, cv2_.w, y256_.data(), k_dim, epilogue{}, [&](int r0, int rows) {
        ln_silu(y256_.data(), k_dim, r0, rows, k_dim, cv2_);
        layernorm(y256_.data() + sz(r0, k_dim), k_dim, memory_.data() + sz(r0, k_dim), k_dim, rows, k_dim, proj_ln_g_,
                  proj_ln_b_, k_eps_vit);
    });
}

void model::run_two_stage() {
    // mem2 = LN(enc_output(memory)); class logits; box MLP deltas on the fixed 40x40 proposals.
    linear(memory_.data(), k_dim, k_pixels, enc_w_, mem2_.data(), k_dim, with_bias(epi::bias, enc_b_), [&](int r0, int rows) {
        layernorm(mem2_.data() + sz(r0, k_dim), k_dim, mem2_.data() + sz(r0, k_dim), k_dim, rows, k_dim, enc_ln_g_,
                  enc_ln_b_, k_eps_dec);
    });
    linear(mem2_.data(), k_dim, k_pixels, enc_cls_w_, enc_cls_.data(), nc_, with_bias(epi::bias, enc_cls_b_));
    linear(mem2_.data(), k_dim, k_pixels, enc_box_w_[0], enc_h1_.data(), k_dim, with_bias(epi::bias_relu, enc_box_b_[0]));
    linear(enc_h1_.data(), k_dim, k_pixels, enc_box_w_[1], enc_h2_.data(), k_dim, with_bias(epi::bias_relu, enc_box_b_[1]));
    linear(enc_h2_.data(), k_dim, k_pixels, enc_box_w_[2], enc_delta_.data(), 4, with_bias(epi::bias, enc_box_b_[2]));
    const float wh = 0.05f;
    for (int pix = 0; pix < k_pixels; ++pix) {
        const float   px = (static_cast<float>(pix % k_grid) + 0.5f) / static_cast<float>(k_grid);
        const float   py = (static_cast<float>(pix / k_grid) + 0.5f) / static_cast<float>(k_grid);
        const float * d  = enc_delta_.data() + sz(pix, 4);
        float *       o  = enc_coords_.data() + sz(pix, 4);
        o[0]             = d[0] * wh + px;
        o[1]             = d[1] * wh + py;
        o[2]             = std::exp(d[2]) * wh;
        o[3]             = std::exp(d[3]) * wh;
        const float * cl = enc_cls_.data() + sz(pix, nc_);
        scores_[pix]     = *std::max_element(cl, cl + nc_);
    }
    if (topk_override_) {
        std::copy(topk_forced_.begin(), topk_forced_.end(), topk_.begin());
    } else {
        topk(scores_.data(), k_pixels, k_queries, topk_.data(), topk_scratch_.data());
    }
    // Reference boxes: query slot i pairs refpoint_embed[i] with the rank-i proposal.
    for (int i = 0; i < k_queries; ++i) {
        const float * ts = enc_coords_.data() + sz(topk_[i], 4);
        const float * rp = refpoint_ + sz(i, 4);
        float *       r  = ref_.data() + sz(i, 4);
        r[0]             = rp[0] * ts[2] + ts[0];
        r[1]             = rp[1] * ts[3] + ts[1];
        r[2]             = std::exp(rp[2]) * ts[2];
        r[3]             = std::exp(rp[3]) * ts[3];
    }
}

void model::run_decoder() {
    // query_pos = ref_point_head(sine(ref)): 128 features per coordinate in the order (y, x, w, h),
    // interleaved sin/cos, dim_t = 10000^(2 floor(j/2) / 128) in float32.
    float dim_t[128];
    for (int j = 0; j < 128; ++j) dim_t[j] = std::pow(10000.0f, static_cast<float>(2 * (j / 2)) / 128.0f);
    const float two_pi   = 6.283185307179586f;
    const int   order[4] = {1, 0, 2, 3};
    for (int i = 0; i < k_queries; ++i) {
        for (int b = 0; b < 4; ++b) {
            const float e = ref_[sz(i, 4) + order[b]] * two_pi;
            float *     o = sine_.data() + sz(i, 2 * k_dim) + b * 128;
            for (int j = 0; j < 128; j += 2) {
                o[j]     = std::sin(e / dim_t[j]);
                o[j + 1] = std::cos(e / dim_t[j + 1]);
            }
        }
    }
    linear(sine_.data(), 2 * k_dim, k_queries, rph_w_[0], qp_h_.data(), k_dim, with_bias(epi::bias_relu, rph_b_[0]));
    linear(qp_h_.data(), k_dim, k_queries, rph_w_[1], query_pos_.data(), k_dim, with_bias(epi::bias, rph_b_[1]));

    // The memory's value projections for all three layers in one GEMM: [1600, 768].
    linear(memory_.data(), k_dim, k_pixels, value_w_, value_.data(), k_dec_layers * k_dim,
           with_bias(epi::bias, value_b_.data()));

    std::memcpy(tgt_.data(), query_feat_, sz(k_queries, k_dim) * 4);
    const float inv_sqrt_dim = std::sqrt(static_cast<float>(k_sa_dim));
    for (int l = 0; l < k_dec_layers; ++l) {
        const dec_layer & d = dec_[l];
        // Self-attention: q = k = tgt + query_pos, v = tgt; torch 1.13 divides q by sqrt(32) before q k^T.
        for (size_t i = 0; i < tgt_.size(); ++i) qin_[i] = tgt_[i] + query_pos_[i];
        linear(qin_.data(), k_dim, k_queries, d.in_qk, qk_.data(), 2 * k_dim, with_bias(epi::bias, d.in_b), [&](int r0, int rows) {
            for (int r = r0; r < r0 + rows; ++r) {
                for (int c = 0; c < k_dim; ++c) qk_[sz(r, 2 * k_dim) + c] /= inv_sqrt_dim;
            }
        });
        linear(tgt_.data(), k_dim, k_queries, d.in_v, v_.data(), k_dim, with_bias(epi::bias, d.in_b + 2 * k_dim));
        pool_.parallel_for(k_sa_heads, [&](int hd, int thread) {
            attention_head(qk_.data() + hd * k_sa_dim, 2 * k_dim, qk_.data() + k_dim + hd * k_sa_dim, 2 * k_dim,
                           v_.data() + hd * k_sa_dim, k_dim, attn_.data() + hd * k_sa_dim, k_dim, k_queries, k_queries,
                           k_sa_dim, 1.0f, att_scratch(thread));
        });
        linear(attn_.data(), k_dim, k_queries, d.out, tgt_.data(), k_dim, with_bias(epi::bias_residual, d.out_b));
        layernorm(tgt_.data(), k_dim, tgt_.data(), k_dim, k_queries, k_dim, d.n1_g, d.n1_b, k_eps_dec);

        // Deformable cross-attention: 16 heads x 1 level x 2 points over the 40x40 memory.
        for (size_t i = 0; i < tgt_.size(); ++i) qin_[i] = tgt_[i] + query_pos_[i];
        linear(qin_.data(), k_dim, k_queries, d.off, off_.data(), k_ca_heads * k_ca_points * 2, with_bias(epi::bias, d.off_b));
        linear(qin_.data(), k_dim, k_queries, d.aw, aw_.data(), k_ca_heads * k_ca_points, with_bias(epi::bias, d.aw_b));
        softmax_rows(aw_.data(), k_ca_points, k_queries * k_ca_heads, k_ca_points);
        std::fill(samp_.begin(), samp_.end(), 0.0f);
        const float * value = value_.data() + l * k_dim;
        pool_.parallel_for(k_queries, [&](int i, int) {
            const float * r = ref_.data() + sz(i, 4);
            for (int hd = 0; hd < k_ca_heads; ++hd) {
                for (int p = 0; p < k_ca_points; ++p) {
                    const float * o  = off_.data() + sz(i, k_ca_heads * k_ca_points * 2) + (hd * k_ca_points + p) * 2;
                    const float   lx = r[0] + o[0] / static_cast<float>(k_ca_points) * r[2] * 0.5f;
                    const float   ly = r[1] + o[1] / static_cast<float>(k_ca_points) * r[3] * 0.5f;
                    const float   a  = aw_[sz(i, k_ca_heads * k_ca_points) + hd * k_ca_points + p];
                    bilinear_sample_accumulate(value + hd * k_ca_dim, k_dec_layers * k_dim, k_grid, k_grid, lx, ly, a,
                                               k_ca_dim, samp_.data() + sz(i, k_dim) + hd * k_ca_dim);
                }
            }
        });
        linear(samp_.data(), k_dim, k_queries, d.outp, tgt_.data(), k_dim, with_bias(epi::bias_residual, d.outp_b));
        layernorm(tgt_.data(), k_dim, tgt_.data(), k_dim, k_queries, k_dim, d.n2_g, d.n2_b, k_eps_dec);

        // FFN 256 -> 2048 -> 256 (ReLU), residual, norm3.
        linear(tgt_.data(), k_dim, k_queries, d.l1, ffn_.data(), k_ffn, with_bias(epi::bias_relu, d.l1_b));
        linear(ffn_.data(), k_ffn, k_queries, d.l2, tgt_.data(), k_dim, with_bias(epi::bias_residual, d.l2_b));
        layernorm(tgt_.data(), k_dim, tgt_.data(), k_dim, k_queries, k_dim, d.n3_g, d.n3_b, k_eps_dec);
        std::memcpy(layer_out_.data() + sz(l * k_queries, k_dim), tgt_.data(), tgt_.size() * 4);
    }
}

void model::run_heads(float * logits, float * boxes) {
    layernorm(tgt_.data(), k_dim, hs_.data(), k_dim, k_queries, k_dim, dec_norm_g_, dec_norm_b_, k_eps_dec);
    linear(hs_.data(), k_dim, k_queries, cls_w_, logits, nc_, with_bias(epi::bias, cls_b_));
    linear(hs_.data(), k_dim, k_queries, box_w_[0], head_h1_.data(), k_dim, with_bias(epi::bias_relu, box_b_[0]));
    linear(head_h1_.data(), k_dim, k_queries, box_w_[1], head_h2_.data(), k_dim, with_bias(epi::bias_relu, box_b_[1]));
    linear(head_h2_.data(), k_dim, k_queries, box_w_[2], head_delta_.data(), 4, with_bias(epi::bias, box_b_[2]));
    for (int i = 0; i < k_queries; ++i) {
        const float * d = head_delta_.data() + sz(i, 4);
        const float * r = ref_.data() + sz(i, 4);
        float *       o = boxes + sz(i, 4);
        o[0]            = d[0] * r[2] + r[0];
        o[1]            = d[1] * r[3] + r[1];
        o[2]            = std::exp(d[2]) * r[2];
        o[3]            = std::exp(d[3]) * r[3];
    }
}

void model::forward(const float * pixel_values, float * logits, float * boxes) {
    double t = now_ms();
    auto   lap = [&](stage s) {
        const double n = now_ms();
        stage_ms_[s]   = n - t;
        t              = n;
    };
    run_embed(pixel_values);
    lap(STAGE_EMBED);
    run_vit();
    lap(STAGE_VIT);
    run_projector();
    lap(STAGE_PROJECTOR);
    run_two_stage();
    lap(STAGE_TWO_STAGE);
    run_decoder();
    lap(STAGE_DECODER);
    run_heads(logits, boxes);
    lap(STAGE_HEADS);
}

}  // namespace rfdetr::cpu
