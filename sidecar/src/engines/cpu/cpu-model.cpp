#include "engines/cpu/cpu-model.h"

#include "engines/cpu/attention-bf16.h"
#include "engines/cpu/attention-int8.h"
#include "engines/cpu/attention.h"
#include "engines/cpu/kernels.h"
#include "engines/cpu/bgemm.h"
#include "engines/cpu/qgemm.h"
#include "engines/engine.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <type_traits>

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

constexpr float k_eps_vit    = 1e-6f;
constexpr float k_eps_dec    = 1e-5f;

const std::string k_vit = "backbone.0.encoder.encoder.";
const std::string k_prj = "backbone.0.projector.stages.0.";

double now_ms() {
    return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

size_t sz(int a, int b) { return static_cast<size_t>(a) * static_cast<size_t>(b); }

}  // namespace

model_dims dims_of(const model_arch & a) {
    if (a.levels() != 1 || a.c2f_blocks != 3 || a.out_feature_indexes.size() != 4) {
        throw error("cpu engine: the checkpoint's projector has " + std::to_string(a.levels()) +
                    " levels; the cpu engine runs the single-level (P4) RF-DETR variants (RF-DETR-LargeDeprecated's "
                    "P3+P5 projector is not built yet): use base, nano, small, medium or large");
    }
    model_dims d;
    d.input        = a.resolution;
    d.patch        = a.patch_size;
    d.patch_k      = 3 * a.patch_size * a.patch_size;
    d.grid         = a.grid();
    d.pixels       = d.grid * d.grid;
    d.win_per_side = a.num_windows;
    d.windows      = a.num_windows * a.num_windows;
    d.win_side     = a.window_side();
    d.win_tok      = 1 + d.win_side * d.win_side;
    d.tokens       = d.windows * d.win_tok;
    d.vit_dim      = a.vit_hidden;
    d.mlp_dim      = a.vit_mlp;
    d.heads        = a.vit_heads;
    d.head_dim     = a.vit_hidden / a.vit_heads;
    d.blocks       = a.blocks_used();
    d.pos_side     = a.pos_grid;
    d.dim          = a.d_model;
    d.c2f_hidden   = a.d_model / 2;
    d.dec_layers   = a.dec_layers;
    d.sa_heads     = a.sa_heads;
    d.sa_dim       = a.d_model / a.sa_heads;
    d.ca_heads     = a.ca_heads;
    d.ca_dim       = a.d_model / a.ca_heads;
    d.ca_points    = a.dec_points;
    d.ffn          = a.ffn;
    d.queries      = a.num_queries;
    for (int f : a.out_feature_indexes) d.tap_blocks.push_back(f - 1);
    for (int b = 0; b < d.blocks; ++b) d.global.push_back(a.is_global(b));
    return d;
}

const float * model::w(const std::string & name) const { return ckpt_.get(name).data; }

packed_weight model::packed(const std::string & name, int r0, int n, precision p) {
    const tensor_view & t = ckpt_.get(name);
    const int           rows = static_cast<int>(t.shape[0]);
    int64_t             k    = 1;
    for (size_t i = 1; i < t.shape.size(); ++i) k *= t.shape[i];
    kmax_ = std::max(kmax_, static_cast<int>(k));
    const float * src = t.data + static_cast<size_t>(r0) * k;
    const int     nn  = n < 0 ? rows - r0 : n;
    return pack_weight_as(p, src, nn, static_cast<int>(k), static_cast<int>(k));
}

packed_weight model::pack_concat(const std::vector<const float *> & parts, int n_each, int k, precision p) {
    std::vector<float> cat(sz(static_cast<int>(parts.size()) * n_each, k));
    for (size_t i = 0; i < parts.size(); ++i) std::memcpy(cat.data() + i * sz(n_each, k), parts[i], sz(n_each, k) * 4);
    kmax_ = std::max(kmax_, k);
    const int n = static_cast<int>(parts.size()) * n_each;
    return pack_weight_as(p, cat.data(), n, k, k);
}

namespace {
// Whether the attention runs in bf16 (attention-bf16.h), at bf16 and int8, by the bf16 GEMM's kernel (which follows
// RFDETR_CPU_ISA): where the bf16 kernel beats the fp32 one: on AMX always; with AVX512-BF16 alone on AMD's cores,
// which run a 512-bit FMA as two halves (16 multiply-adds a cycle) and vdpbf16ps at 32: there the bf16 heads are
// 1.6-2.2x faster than fp32 (Zen 4: global 8.66 -> 3.90 ms, window 40.5 -> 24.6 us, decoder 159 -> 81 us; README,
// "Attention in bf16"), while Intel's two 512-bit FMA ports tie with vdpbf16ps (Sapphire Rapids capped to AVX-512:
// 1.1x global, 0.7x window), so there, and on Intel CPUs with AVX512-BF16 but no AMX, the fp32 attention stays.
// At int8 on Zen 4 the ViT's attention goes to int8 instead (attention_in_int8); the decoder's stays bf16.
bool attention_in_bf16(precision p) {
    if (p == precision::fp32) return false;
    if (std::strcmp(bgemm_isa(), "amx") == 0) return attention_bf16_select_isa("amx");
    __builtin_cpu_init();
    if (std::strcmp(bgemm_isa(), "avx512bf16") == 0 && __builtin_cpu_is("amd")) return attention_bf16_select_isa("avx512bf16");
    return false;
}

// Whether the ViT's attention runs in int8 (attention-int8.h), at int8: where the int8 GEMM runs on AVX-512 VNNI
// (which follows RFDETR_CPU_ISA), i.e. a CPU without AMX: Intel's Ice Lake, Cascade Lake, Cooper Lake, and AMD's
// Zen 4, where it takes the ViT from the bf16 attention (the decoder's heads stay bf16 there). Its two products on
// vpdpbusd cut the int8 forward's CPU time by 19 % against the fp32 attention on an AVX-512 VNNI Xeon (0.811x,
// forward by forward) and by 6.5 % against the bf16 attention on Zen 4 (0.935x; README.md, "Attention in int8"); with
// fp32's top-k held, Base case-2's logits PCC went 0.99976 -> 0.99968.
bool attention_in_int8(precision p, int head_dim) {
    return p == precision::int8 && std::strcmp(qgemm_isa(), "avx512vnni") == 0 && attention_int8_supported() &&
           attention_int8_width_ok(head_dim);
}

// One head, in bf16 (attention-bf16.h) or fp32 (attention.h): the call sites pass the same operands to either.
void head_attention(bool bf16, const float * q, int ldq, const float * k, int ldk, const float * v, int ldv, float * o,
                    int ldo, int nq, int nk, int d, float scale, float * scratch) {
    if (bf16) {
        attention_bf16_head(q, ldq, k, ldk, v, ldv, o, ldo, nq, nk, d, scale, scratch);
    } else {
        attention_head(q, ldq, k, ldk, v, ldv, o, ldo, nq, nk, d, scale, scratch);
    }
}
}  // namespace

// int8's projector convs in bf16 (fp32 without a bf16 kernel): of int8's layer groups run one at a time in bf16, they
// took the Base case-2 logits PCC with fp32's top-k held from 0.99898 to 0.99956, the next best group (the ViT fc1)
// to 0.99905 (README.md, "int8"). In bf16 they cost the AMX int8 forward nothing measurable.
precision projector_precision(precision p) {
    std::string missing;
    if (p != precision::int8) return p;
    return bf16_supported(missing) ? precision::bf16 : precision::fp32;
}

model::model(const checkpoint & ckpt, int threads, precision p)
    : ckpt_(ckpt), prec_(p), projector_prec_(projector_precision(p)), bf16_attn_(attention_in_bf16(p)), pool_(threads),
      nc_(ckpt.num_classes()),
      d_(dims_of(ckpt.variant().arch)) {
    // The bf16 kernels take head widths that are multiples of 32 (every variant's 64 and 32 are).
    bf16_attn_ = bf16_attn_ && attention_bf16_width_ok(d_.head_dim) && attention_bf16_width_ok(d_.sa_dim);
    int8_attn_ = attention_in_int8(prec_, d_.head_dim);
    // ViT
    patch_w_ = packed(k_vit + "embeddings.patch_embeddings.projection.weight", 0, -1, prec_);
    patch_b_ = w(k_vit + "embeddings.patch_embeddings.projection.bias");
    for (int b = 0; b < d_.blocks; ++b) {
        const std::string p = k_vit + "encoder.layer." + std::to_string(b) + ".";
        vit_block         blk;
        std::vector<const float *> qkv_parts;
        blk.qkv_b.resize(3 * d_.vit_dim);
        const char * parts[3] = {"query", "key", "value"};
        for (int i = 0; i < 3; ++i) {
            const std::string a = p + "attention.attention." + parts[i];
            qkv_parts.push_back(w(a + ".weight"));
            std::memcpy(blk.qkv_b.data() + i * d_.vit_dim, w(a + ".bias"), d_.vit_dim * 4);
        }
        blk.qkv    = pack_concat(qkv_parts, d_.vit_dim, d_.vit_dim, prec_);
        blk.ln1_g  = w(p + "norm1.weight");
        blk.ln1_b  = w(p + "norm1.bias");
        blk.proj   = packed(p + "attention.output.dense.weight", 0, -1, prec_);
        blk.proj_b = w(p + "attention.output.dense.bias");
        blk.ls1    = w(p + "layer_scale1.lambda1");
        blk.ln2_g  = w(p + "norm2.weight");
        blk.ln2_b  = w(p + "norm2.bias");
        blk.fc1    = packed(p + "mlp.fc1.weight", 0, -1, prec_);
        blk.fc1_b  = w(p + "mlp.fc1.bias");
        blk.fc2    = packed(p + "mlp.fc2.weight", 0, -1, prec_);
        blk.fc2_b  = w(p + "mlp.fc2.bias");
        blk.ls2    = w(p + "layer_scale2.lambda1");
        blk.global = d_.global[b];
        blocks_.push_back(std::move(blk));
    }
    final_ln_g_ = w(k_vit + "layernorm.weight");
    final_ln_b_ = w(k_vit + "layernorm.bias");

    // Position embeddings are input-independent: cls row as is, the grid (Base 37x37) resized to the patch grid
    // (Base 40x40) once, or used as is when they agree (Nano..Large).
    {
        const float * pos = w(k_vit + "embeddings.position_embeddings");
        pos_embed_.resize(sz(1 + d_.pixels, d_.vit_dim));
        std::memcpy(pos_embed_.data(), pos, d_.vit_dim * 4);
        if (d_.pos_side == d_.grid) {  // the native grid: upstream adds the parameter as is
            std::memcpy(pos_embed_.data(), pos, sz(1 + d_.pixels, d_.vit_dim) * 4);
        } else {
            std::vector<float> scratch(sz(d_.pos_side * d_.grid, d_.vit_dim));
            resize_bicubic_aa(pos + d_.vit_dim, d_.pos_side, d_.pos_side, d_.vit_dim, pos_embed_.data() + d_.vit_dim,
                              d_.grid, d_.grid, scratch.data());
        }
        // cls token + its position embedding, the same in every window.
        const float * cls = w(k_vit + "embeddings.cls_token");
        for (int c = 0; c < d_.vit_dim; ++c) pos_embed_[c] = cls[c] + pos_embed_[c];
    }

    // Projector
    auto cx = [&](const std::string & p) {
        return convx{packed(p + ".conv.weight", 0, -1, projector_prec_), w(p + ".bn.weight"), w(p + ".bn.bias")};
    };
    cv1_ = cx(k_prj + "0.cv1");
    cv2_ = cx(k_prj + "0.cv2");
    for (int i = 0; i < 3; ++i) {
        m_[i][0] = cx(k_prj + "0.m." + std::to_string(i) + ".cv1");
        m_[i][1] = cx(k_prj + "0.m." + std::to_string(i) + ".cv2");
    }
    proj_ln_g_ = w(k_prj + "1.weight");
    proj_ln_b_ = w(k_prj + "1.bias");

    // Two-stage (group 0) and decoder. The two-stage heads, the reference-point head and the class/box heads run
    // in bf16 under precision::bf16 (README.md, "bf16": measured within the gates) and under int8 where the projector
    // does (a bf16 kernel runs; since 8 Dec: 0.983x the int8 forward on Zen 4, the gates held on all 11 fixtures).
    const precision heads = heads_prec();
    enc_w_     = packed("transformer.enc_output.0.weight", 0, -1, heads);
    enc_b_     = w("transformer.enc_output.0.bias");
    enc_ln_g_  = w("transformer.enc_output_norm.0.weight");
    enc_ln_b_  = w("transformer.enc_output_norm.0.bias");
    enc_cls_w_ = packed("transformer.enc_out_class_embed.0.weight", 0, -1, heads);
    enc_cls_b_ = w("transformer.enc_out_class_embed.0.bias");
    for (int i = 0; i < 3; ++i) {
        const std::string p = "transformer.enc_out_bbox_embed.0.layers." + std::to_string(i);
        enc_box_w_[i]       = packed(p + ".weight", 0, -1, heads);
        enc_box_b_[i]       = w(p + ".bias");
        const std::string q = "bbox_embed.layers." + std::to_string(i);
        box_w_[i]           = packed(q + ".weight", 0, -1, heads);
        box_b_[i]           = w(q + ".bias");
    }
    for (int i = 0; i < 2; ++i) {
        const std::string p = "transformer.decoder.ref_point_head.layers." + std::to_string(i);
        rph_w_[i]           = packed(p + ".weight", 0, -1, heads);
        rph_b_[i]           = w(p + ".bias");
    }
    query_feat_ = w("query_feat.weight");
    refpoint_   = w("refpoint_embed.weight");
    std::vector<const float *> value_parts;
    value_b_.resize(d_.dec_layers * d_.dim);
    for (int l = 0; l < d_.dec_layers; ++l) {
        const std::string p = "transformer.decoder.layers." + std::to_string(l) + ".";
        dec_layer         d;
        d.in_qk  = packed(p + "self_attn.in_proj_weight", 0, 2 * d_.dim, prec_);
        d.in_v   = packed(p + "self_attn.in_proj_weight", 2 * d_.dim, d_.dim, prec_);
        d.in_b   = w(p + "self_attn.in_proj_bias");
        d.out    = packed(p + "self_attn.out_proj.weight", 0, -1, prec_);
        d.out_b  = w(p + "self_attn.out_proj.bias");
        d.n1_g   = w(p + "norm1.weight");
        d.n1_b   = w(p + "norm1.bias");
        d.off    = packed(p + "cross_attn.sampling_offsets.weight", 0, -1, prec_);
        d.off_b  = w(p + "cross_attn.sampling_offsets.bias");
        d.aw     = packed(p + "cross_attn.attention_weights.weight", 0, -1, prec_);
        d.aw_b   = w(p + "cross_attn.attention_weights.bias");
        d.outp   = packed(p + "cross_attn.output_proj.weight", 0, -1, prec_);
        d.outp_b = w(p + "cross_attn.output_proj.bias");
        d.l1     = packed(p + "linear1.weight", 0, -1, prec_);
        d.l1_b   = w(p + "linear1.bias");
        d.l2     = packed(p + "linear2.weight", 0, -1, prec_);
        d.l2_b   = w(p + "linear2.bias");
        d.n2_g   = w(p + "norm2.weight");
        d.n2_b   = w(p + "norm2.bias");
        d.n3_g   = w(p + "norm3.weight");
        d.n3_b   = w(p + "norm3.bias");
        dec_.push_back(std::move(d));
        value_parts.push_back(w(p + "cross_attn.value_proj.weight"));
        std::memcpy(value_b_.data() + l * d_.dim, w(p + "cross_attn.value_proj.bias"), d_.dim * 4);
    }
    value_w_    = pack_concat(value_parts, d_.dim, d_.dim, prec_);
    dec_norm_g_ = w("transformer.decoder.norm.weight");
    dec_norm_b_ = w("transformer.decoder.norm.bias");
    cls_w_      = packed("class_embed.weight", 0, -1, heads);
    cls_b_      = w("class_embed.bias");
    if (ckpt.variant().arch.segment()) build_mask_head();

    // GEMM scratch per thread, for the deepest reduction of any packed weight.
    gemm_scratch_stride_ = (gemm_scratch_floats(kmax_) + 15) & ~static_cast<size_t>(15);
    gemm_scratch_.resize(gemm_scratch_stride_ * pool_.size());

    // Buffers, sized once.
    cols_.resize(sz(d_.pixels, d_.patch_k));
    embeddings_.resize(sz(d_.tokens, d_.vit_dim));
    x_.resize(sz(d_.tokens, d_.vit_dim));
    h_.resize(sz(d_.tokens, d_.vit_dim));
    // bf16 with the bf16 attention: q, k, v and the attention's output live as bf16 rows only (the qkv GEMM
    // writes them, proj reads them in place; bgemm.h's hand-off), the same numbers as the fp32 round trips.
    if (prec_ == precision::bf16 && bf16_attn_ && d_.vit_dim % k_bk_tile == 0) {
        qkv_b_.resize(sz(d_.tokens, 3 * d_.vit_dim));
        ctx_b_.resize(sz(d_.tokens, d_.vit_dim));
    } else {
        qkv_.resize(sz(d_.tokens, 3 * d_.vit_dim));
        ctx_.resize(sz(d_.tokens, d_.vit_dim));
    }
    // bf16 with whole 32-k steps: the MLP's hidden rows live as bf16 only (the fp32 buffer stays unused).
    if (prec_ == precision::bf16 && d_.mlp_dim % k_bk_tile == 0) {
        mlp_b_.resize(sz(d_.tokens, d_.mlp_dim));
    } else {
        mlp_.resize(sz(d_.tokens, d_.mlp_dim));
    }
    // Attention scratch per thread: the largest of a window head (its keys packed in place), a global
    // query block, and a decoder head.
    att_scratch_stride_ = std::max({attention_head_scratch_floats(d_.win_tok, d_.head_dim),
                                    attention_scratch_floats(k_attention_block, d_.head_dim),
                                    attention_head_scratch_floats(d_.queries, d_.sa_dim)});
    if (bf16_attn_) {  // a global block's score rows against all the keys, a window head, a decoder head
        att_scratch_stride_ = std::max({att_scratch_stride_, attention_bf16_scratch_floats(d_.tokens, d_.head_dim),
                                        attention_bf16_head_scratch_floats(d_.win_tok, d_.head_dim),
                                        attention_bf16_head_scratch_floats(d_.queries, d_.sa_dim)});
    }
    if (int8_attn_) {  // a global block's scores and p rows against all the keys, a window head
        att_scratch_stride_ = std::max({att_scratch_stride_, attention_int8_scratch_floats(d_.tokens, d_.head_dim),
                                        attention_int8_head_scratch_floats(d_.win_tok, d_.head_dim)});
    }
    att_scratch_stride_ = (att_scratch_stride_ + 15) & ~static_cast<size_t>(15);
    att_scratch_.resize(att_scratch_stride_ * pool_.size());
    keys_.resize(global_kv_floats() * d_.heads);
    taps_.resize(sz(d_.pixels, 4 * d_.vit_dim));
    cat_.resize(sz(d_.pixels, 5 * d_.c2f_hidden));
    if (m_[0][0].w.q || m_[0][0].w.b) im2col_.resize(sz(d_.pixels, 9 * d_.c2f_hidden));  // fp32: gemm_conv3x3
    t128_.resize(sz(d_.pixels, d_.c2f_hidden));
    y256_.resize(sz(d_.pixels, d_.dim));
    memory_.resize(sz(d_.pixels, d_.dim));
    mem2_.resize(sz(d_.pixels, d_.dim));
    enc_cls_.resize(sz(d_.pixels, nc_));
    enc_h1_.resize(sz(d_.pixels, d_.dim));
    enc_h2_.resize(sz(d_.pixels, d_.dim));
    enc_delta_.resize(sz(d_.pixels, 4));
    enc_coords_.resize(sz(d_.pixels, 4));
    scores_.resize(d_.pixels);
    topk_.resize(d_.queries);
    topk_scratch_.resize(d_.pixels);
    topk_forced_.resize(d_.queries);
    ref_.resize(sz(d_.queries, 4));
    sine_.resize(sz(d_.queries, 2 * d_.dim));
    qp_h_.resize(sz(d_.queries, d_.dim));
    query_pos_.resize(sz(d_.queries, d_.dim));
    tgt_.resize(sz(d_.queries, d_.dim));
    qin_.resize(sz(d_.queries, d_.dim));
    qk_.resize(sz(d_.queries, 2 * d_.dim));
    v_.resize(sz(d_.queries, d_.dim));
    attn_.resize(sz(d_.queries, d_.dim));
    tmp_.resize(sz(d_.queries, d_.dim));
    off_.resize(sz(d_.queries, d_.ca_heads * d_.ca_points * 2));
    aw_.resize(sz(d_.queries, d_.ca_heads * d_.ca_points));
    samp_.resize(sz(d_.queries, d_.dim));
    ffn_.resize(sz(d_.queries, d_.ffn));
    value_.resize(sz(d_.pixels, d_.dec_layers * d_.dim));
    layer_out_.resize(sz(d_.dec_layers * d_.queries, d_.dim));
    hs_.resize(sz(d_.queries, d_.dim));
    head_h1_.resize(sz(d_.queries, d_.dim));
    head_h2_.resize(sz(d_.queries, d_.dim));
    head_delta_.resize(sz(d_.queries, 4));
}

void model::build_mask_head() {
    const std::string p = "segmentation_head.";
    seg_head_weights  sw;
    const model_arch & a = ckpt_.variant().arch;
    for (int b = 0; b < a.mask_blocks; ++b) {  // one depthwise-conv block per decoder layer
        const std::string q = p + "blocks." + std::to_string(b) + ".";
        sw.blocks.push_back({w(q + "dwconv.weight"), w(q + "dwconv.bias"), w(q + "norm.weight"), w(q + "norm.bias"),
                             w(q + "pwconv1.weight"), w(q + "pwconv1.bias")});
    }
    sw.sp_w = w(p + "spatial_features_proj.weight");
    sw.sp_b = w(p + "spatial_features_proj.bias");
    sw.qn_g = w(p + "query_features_block.norm_in.weight");
    sw.qn_b = w(p + "query_features_block.norm_in.bias");
    sw.q1_w = w(p + "query_features_block.layers.0.weight");
    sw.q1_b = w(p + "query_features_block.layers.0.bias");
    sw.q2_w = w(p + "query_features_block.layers.2.weight");
    sw.q2_b = w(p + "query_features_block.layers.2.bias");
    sw.qp_w = w(p + "query_features_proj.weight");
    sw.qp_b = w(p + "query_features_proj.bias");
    sw.bias = *w(p + "bias");
    d_.mask_side = a.mask_side();
    seg_head_dims hd;
    hd.grid    = d_.grid;
    hd.side    = d_.mask_side;
    hd.dim     = d_.dim;
    hd.blocks  = a.mask_blocks;
    hd.hidden  = static_cast<int>(ckpt_.get(p + "query_features_block.layers.0.weight").shape[0]);
    hd.queries = d_.queries;
    seg_ = std::make_unique<seg_head>(sw, hd, pool_, prec_);
}

void model::masks(const uint32_t * queries, int k, float * out) {
    if (!seg_) {
        throw error("cpu model: mask logits asked of a detection checkpoint (variant " + ckpt_.variant().variant +
                    "); only RF-DETR Seg checkpoints (segmentation_head.*) have a mask head");
    }
    for (int i = 0; i < k; ++i) {
        if (queries[i] >= static_cast<uint32_t>(d_.queries)) {
            throw error("cpu model: mask row " + std::to_string(i) + " asks for query " + std::to_string(queries[i]) +
                        "; expected 0.." + std::to_string(d_.queries - 1));
        }
    }
    if (k == 0) return;
    seg_->spatial(memory_.data());
    seg_->masks(hs_.data(), queries, k, out);
}

void model::set_topk_override(const int32_t * idx) {
    topk_override_ = idx != nullptr;
    if (idx) std::copy(idx, idx + d_.queries, topk_forced_.begin());
}

int model::row_parts(int m) const { return gemm_row_parts(m, pool_.size()); }

void model::row_range(int m, int parts, int p, int & r0, int & r1) { gemm_row_range(m, parts, p, r0, r1); }

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
    pool_.parallel_for(d_.grid, [&](int py, int) {
        for (int pxi = 0; pxi < d_.grid; ++pxi) {
            float * row = cols_.data() + sz(py * d_.grid + pxi, d_.patch_k);
            for (int c = 0; c < 3; ++c) {
                for (int ky = 0; ky < d_.patch; ++ky) {
                    const float * src = px + (sz(c, d_.input) + py * d_.patch + ky) * d_.input + pxi * d_.patch;
                    std::memcpy(row + (c * d_.patch + ky) * d_.patch, src, d_.patch * 4);
                }
            }
        }
    });
    // Conv output (+bias), then + position embedding, scattered into window order (wy, wx, py, px).
    float * patches = h_.data();  // [1600, 384] scratch
    linear(cols_.data(), d_.patch_k, d_.pixels, patch_w_, patches, d_.vit_dim, with_bias(epi::bias, patch_b_));
    pool_.parallel_for(d_.windows, [&](int win, int) {
        const int wy = win / d_.win_per_side, wx = win % d_.win_per_side;
        float *   dst = x_.data() + sz(win * d_.win_tok, d_.vit_dim);
        std::memcpy(dst, pos_embed_.data(), d_.vit_dim * 4);
        for (int t = 0; t < d_.win_side * d_.win_side; ++t) {
            const int     pix = (wy * d_.win_side + t / d_.win_side) * d_.grid + wx * d_.win_side + t % d_.win_side;
            const float * p   = patches + sz(pix, d_.vit_dim);
            const float * pe  = pos_embed_.data() + sz(1 + pix, d_.vit_dim);
            float *       o   = dst + sz(1 + t, d_.vit_dim);
            for (int c = 0; c < d_.vit_dim; ++c) o[c] = p[c] + pe[c];
        }
    });
    std::memcpy(embeddings_.data(), x_.data(), embeddings_.size() * 4);
}

// Rows of a row part that go through proj, fc1 and fc2 together. int8 and bf16: 64, so that fc1's output (64 x 1536
// floats, 384 KB at Base) is still in L2 when fc2 reads it back, instead of a whole part's (up to 2.5 MB at 1
// thread) going out to memory and back; the int8 weights streamed once per chunk are 1.3 MB. Measured on the
// int8 forward (1 thread, CPU ms, alternating, load 7-10): whole parts 341/313, 32 rows 311/321, 64 rows
// 309/310, 128 rows 341/328; bf16 (fc1's output handed over as bf16 rows): whole parts 301/303, 64 rows 296/298.
// fp32: 112 rows (8 AVX-512 tiles; fc1's output 688 KB). Its weights are 4x larger, but the GEMM prefetches each
// panel slice while the tiles pass the previous one (gemm.cpp), so re-streaming them per chunk costs less than fc2
// reading the hidden rows back from memory: fp32 forward (1 thread, CPU ms, 3 alternations each, load 0.5-1.6)
// whole parts 638/600, 112 rows 624/581, 56 rows 582, 252 rows 608 (medians).
int model::mlp_chunk_rows(int rows) const { return prec_ == precision::fp32 ? std::min(rows, 112) : 64; }

// Attention: softmax(q k^T / 8) v per head, fused (attention.h); windows of 101 tokens, one task per (window,
// head), or all 1616 in the global blocks: each head's keys packed once, then one task per (head, 64-query block).
// At bf16/int8 with AMX the same tasks and operands run attention-bf16.h (K and V packed together), from and to
// bf16 rows when T is uint16_t (bf16's hand-off).
size_t model::global_kv_floats() const {
    if (int8_attn_) return attention_int8_kv_floats(d_.tokens, d_.head_dim);
    return bf16_attn_ ? attention_bf16_kv_floats(d_.tokens, d_.head_dim) : attention_kv_floats(d_.tokens, d_.head_dim);
}

template <class T>
void model::vit_attention(const T * qkv, T * ctx, bool global, float scale) {
    constexpr bool f32 = std::is_same_v<T, float>;
    const int      ld = 3 * d_.vit_dim, hdim = d_.head_dim;
    if (global) {
        const size_t kfl = global_kv_floats();
        pool_.parallel_for(d_.heads, [&](int hd, int) {
            const T * k = qkv + d_.vit_dim + hd * hdim;
            if constexpr (f32) {
                if (int8_attn_) {
                    return attention_int8_pack(k, ld, k + d_.vit_dim, ld, d_.tokens, hdim, scale, keys_.data() + kfl * hd);
                }
                if (!bf16_attn_) return attention_pack_kv(k, ld, k + d_.vit_dim, ld, d_.tokens, hdim, keys_.data() + kfl * hd);
            }
            attention_bf16_pack(k, ld, k + d_.vit_dim, ld, d_.tokens, hdim, keys_.data() + kfl * hd);
        });
        const int qblocks = (d_.tokens + k_attention_block - 1) / k_attention_block;
        pool_.parallel_for(d_.heads * qblocks, [&](int task, int thread) {
            const int hd = task / qblocks, q0 = (task % qblocks) * k_attention_block;
            const int nq = std::min(k_attention_block, d_.tokens - q0);
            const T * q  = qkv + sz(q0, ld) + hd * hdim;
            T *       o  = ctx + sz(q0, d_.vit_dim) + hd * hdim;
            if constexpr (f32) {
                if (int8_attn_) {
                    return attention_int8_block(q, ld, keys_.data() + kfl * hd, d_.tokens, o, d_.vit_dim, nq, hdim,
                                                att_scratch(thread));
                }
                if (!bf16_attn_) {
                    return attention_block(q, ld, keys_.data() + kfl * hd, d_.tokens, o, d_.vit_dim, nq, hdim, scale,
                                           att_scratch(thread));
                }
            }
            attention_bf16_block(q, ld, keys_.data() + kfl * hd, d_.tokens, o, d_.vit_dim, nq, hdim, scale,
                                 att_scratch(thread));
        });
        return;
    }
    pool_.parallel_for(d_.windows * d_.heads, [&](int task, int thread) {
        const int win = task / d_.heads, hd = task % d_.heads;
        window_head(qkv + sz(win * d_.win_tok, ld) + hd * hdim, ctx + sz(win * d_.win_tok, d_.vit_dim) + hd * hdim, scale,
                    thread);
    });
}

template <class T>
void model::window_head(const T * q, T * o, float scale, int thread) {
    const int ld = 3 * d_.vit_dim, hdim = d_.head_dim;
    if constexpr (std::is_same_v<T, float>) {
        if (int8_attn_) {
            return attention_int8_head(q, ld, q + d_.vit_dim, ld, q + 2 * d_.vit_dim, ld, o, d_.vit_dim, d_.win_tok,
                                       d_.win_tok, hdim, scale, att_scratch(thread));
        }
        head_attention(bf16_attn_, q, ld, q + d_.vit_dim, ld, q + 2 * d_.vit_dim, ld, o, d_.vit_dim, d_.win_tok, d_.win_tok,
                       hdim, scale, att_scratch(thread));
    } else {
        attention_bf16_head(q, ld, q + d_.vit_dim, ld, q + 2 * d_.vit_dim, ld, o, d_.vit_dim, d_.win_tok, d_.win_tok,
                            hdim, scale, att_scratch(thread));
    }
}

// A window block's qkv GEMM and attention, window by window: one task per window computes its win_tok rows of q, k, v
// into its thread's own win_tok rows of qkv_ (rows thread * win_tok on), then its heads read them from there, in L2,
// and the next window's stores hit the same lines. Written by one GEMM over all tokens, the 7.4 MB of q, k, v went out
// to L3 and were read back (README.md, "fp32 on an AVX-512 VNNI Xeon"). Same numbers: no output row's sums depend on
// how the rows are grouped. bf16's q, k, v rows (qkv_b_) the same way: 0.993x the bf16 forward on Zen 4, within the
// noise. The projection and MLP stay in row parts: run window by window as well, they cost 1.7 %.
void model::vit_windows(const vit_block & blk, const a_layernorm & ln1, float scale) {
    const int ld = 3 * d_.vit_dim;
    pool_.parallel_for(d_.windows, [&](int win, int thread) {
        const int     r0 = win * d_.win_tok;
        const float * x  = x_.data() + sz(r0, d_.vit_dim);
        const auto    b  = with_bias(epi::bias, blk.qkv_b.data());
        auto heads = [&](auto * qkv, auto * ctx) {
            for (int hd = 0; hd < d_.heads; ++hd) {
                window_head(qkv + hd * d_.head_dim, ctx + sz(r0, d_.vit_dim) + hd * d_.head_dim, scale, thread);
            }
        };
        if (!qkv_b_.empty()) {  // bf16: q, k, v as bf16 rows (bgemm.h's hand-off)
            uint16_t * qkv = qkv_b_.data() + sz(thread * d_.win_tok, ld);
            bgemm_packed_to_bf16(d_.win_tok, x, d_.vit_dim, *blk.qkv.b, qkv, ld, b, gemm_scratch(thread), &ln1);
            return heads(qkv, ctx_b_.data());
        }
        float * qkv = qkv_.data() + sz(thread * d_.win_tok, ld);
        gemm_packed(d_.win_tok, x, d_.vit_dim, blk.qkv, qkv, ld, b, gemm_scratch(thread), &ln1);
        heads(qkv, ctx_.data());
    });
}

void model::run_vit() {
    // softmax(q k^T / sqrt(head_dim)): 1/8 for every variant's 64-wide heads, exact in f32.
    const float inv_sqrt_head = 1.0f / std::sqrt(static_cast<float>(d_.head_dim));
    const int tap_lds = 4 * d_.vit_dim;
    for (int b = 0; b < d_.blocks; ++b) {
        const vit_block & blk = blocks_[b];
        // qkv = LN1(x) Wqkv^T + b (one fused GEMM, the LayerNorm applied as its rows are packed).
        const int      parts = row_parts(d_.tokens);
        const a_layernorm ln1{blk.ln1_g, blk.ln1_b, k_eps_vit};
        if (!blk.global && windows_fused()) {
            vit_windows(blk, ln1, inv_sqrt_head);
        } else if (!qkv_b_.empty()) {
            pool_.parallel_for(parts, [&](int p, int thread) {
                int r0, r1;
                row_range(d_.tokens, parts, p, r0, r1);
                bgemm_packed_to_bf16(r1 - r0, x_.data() + sz(r0, d_.vit_dim), d_.vit_dim, *blk.qkv.b,
                                     qkv_b_.data() + sz(r0, 3 * d_.vit_dim), 3 * d_.vit_dim,
                                     with_bias(epi::bias, blk.qkv_b.data()), gemm_scratch(thread), &ln1);
            });
            vit_attention(qkv_b_.data(), ctx_b_.data(), blk.global, inv_sqrt_head);
        } else {
            linear(x_.data(), d_.vit_dim, d_.tokens, blk.qkv, qkv_.data(), 3 * d_.vit_dim, with_bias(epi::bias, blk.qkv_b.data()),
                   [](int, int) {}, &ln1);
            vit_attention(qkv_.data(), ctx_.data(), blk.global, inv_sqrt_head);
        }
        // Projection with x = (y + b) * ls1 + x in its epilogue (the reference's order); then the MLP:
        // fc1 on LN2(x) (LayerNorm in the A pass) with bias + GELU in the epilogue, fc2 with the second
        // LayerScale + residual. One row part per task, each activation read and written once.
        const a_layernorm ln2{blk.ln2_g, blk.ln2_b, k_eps_vit};
        pool_.parallel_for(parts, [&](int p, int thread) {
            int r0, r1;
            row_range(d_.tokens, parts, p, r0, r1);
            float *   scr   = gemm_scratch(thread);
            const int chunk = mlp_chunk_rows(r1 - r0);
            for (int c0 = r0; c0 < r1; c0 += chunk) {
                const int rows = std::min(chunk, r1 - c0);
                float *   x    = x_.data() + sz(c0, d_.vit_dim);
                if (!ctx_b_.empty()) {
                    bgemm_packed_from_bf16(rows, ctx_b_.data() + sz(c0, d_.vit_dim), d_.vit_dim, *blk.proj.b, x, d_.vit_dim,
                                           with_bias(epi::bias_scale_add, blk.proj_b, blk.ls1), scr);
                } else {
                    gemm_packed(rows, ctx_.data() + sz(c0, d_.vit_dim), d_.vit_dim, blk.proj, x, d_.vit_dim,
                                with_bias(epi::bias_scale_add, blk.proj_b, blk.ls1), scr);
                }
                if (!mlp_b_.empty()) {  // bf16: the GELU output handed to fc2 as bf16 rows (bgemm.h), no fp32 round trip
                    uint16_t * hb = mlp_b_.data() + sz(r0, d_.mlp_dim);
                    bgemm_packed_to_bf16(rows, x, d_.vit_dim, *blk.fc1.b, hb, d_.mlp_dim, with_bias(epi::bias_gelu, blk.fc1_b),
                                         scr, &ln2);
                    bgemm_packed_from_bf16(rows, hb, d_.mlp_dim, *blk.fc2.b, x, d_.vit_dim,
                                           with_bias(epi::bias_scale_add, blk.fc2_b, blk.ls2), scr);
                    continue;
                }
                float * hid = mlp_.data() + sz(r0, d_.mlp_dim);
                gemm_packed(rows, x, d_.vit_dim, blk.fc1, hid, d_.mlp_dim, with_bias(epi::bias_gelu, blk.fc1_b), scr, &ln2);
                gemm_packed(rows, hid, d_.mlp_dim, blk.fc2, x, d_.vit_dim, with_bias(epi::bias_scale_add, blk.fc2_b, blk.ls2),
                            scr);
            }
        });
        // Taps: outputs of blocks 1, 4, 7, 10 through the final LayerNorm, cls dropped, un-windowed.
        for (int t = 0; t < 4; ++t) {
            if (d_.tap_blocks[t] != b) continue;
            pool_.parallel_for(d_.windows, [&](int win, int) {
                const int wy = win / d_.win_per_side, wx = win % d_.win_per_side;
                for (int tok = 0; tok < d_.win_side * d_.win_side; ++tok) {
                    const int pix = (wy * d_.win_side + tok / d_.win_side) * d_.grid + wx * d_.win_side + tok % d_.win_side;
                    layernorm(x_.data() + sz(win * d_.win_tok + 1 + tok, d_.vit_dim), d_.vit_dim,
                              taps_.data() + sz(pix, tap_lds) + t * d_.vit_dim, tap_lds, 1, d_.vit_dim, final_ln_g_,
                              final_ln_b_, k_eps_vit);
                }
            });
        }
    }
}

void model::run_projector() {
    const int ldc = 5 * d_.c2f_hidden;  // cat[y0, y1, m0, m1, m2]
    // ConvX epilogue: channels-first LayerNorm (eps 1e-6) then SiLU, in place.
    auto ln_silu = [&](float * y, int ld, int r0, int rows, int n, const convx & cv) {
        layernorm(y + sz(r0, ld), ld, y + sz(r0, ld), ld, rows, n, cv.g, cv.b, k_eps_vit);
        silu(y + sz(r0, ld), ld, rows, n);
    };
    // cv1: 1x1 1536 -> 256 into cat columns 0..255.
    linear(taps_.data(), 4 * d_.vit_dim, d_.pixels, cv1_.w, cat_.data(), ldc, epilogue{},
           [&](int r0, int rows) { ln_silu(cat_.data(), ldc, r0, rows, d_.dim, cv1_); });
    // Three bottlenecks (two 3x3 convs each, no shortcut), chained from y1; outputs at cat columns 256, 384, 512.
    const int k9 = 9 * d_.c2f_hidden;
    for (int i = 0; i < 3; ++i) {
        const float * in  = cat_.data() + (1 + i) * d_.c2f_hidden;
        float *       out = cat_.data() + (2 + i) * d_.c2f_hidden;
        for (int j = 0; j < 2; ++j) {
            const float * src   = j == 0 ? in : t128_.data();
            const int     ldsrc = j == 0 ? ldc : d_.c2f_hidden;
            float *       dst   = j == 0 ? t128_.data() : out;
            const int     lddst = j == 0 ? d_.c2f_hidden : ldc;
            const convx & cv    = m_[i][j];
            const int     parts = std::min(4 * pool_.size(), d_.grid);  // image row bands, as row_parts
            pool_.parallel_for(parts, [&](int p, int thread) {
                const int y0 = d_.grid * p / parts, y1 = d_.grid * (p + 1) / parts;
                const int r0 = y0 * d_.grid, rows = (y1 - y0) * d_.grid;
                if (!cv.w.q && !cv.w.b) {  // fp32: packed straight from the map
                    gemm_conv3x3(src, ldsrc, d_.grid, d_.grid, d_.c2f_hidden, r0, rows, cv.w, dst + sz(r0, lddst),
                                 lddst, epilogue{}, gemm_scratch(thread));
                } else {
                    im2col_3x3(src, ldsrc, d_.grid, d_.grid, d_.c2f_hidden, im2col_.data(), y0, y1);
                    gemm_packed(rows, im2col_.data() + sz(r0, k9), k9, cv.w, dst + sz(r0, lddst), lddst, epilogue{},
                                gemm_scratch(thread));
                }
                ln_silu(dst, lddst, r0, rows, d_.c2f_hidden, cv);
            });
        }
    }
    // cv2: 1x1 640 -> 256, then the projector's final LayerNorm (no activation) -> memory.
    linear(cat_.data(), ldc, d_.pixels, cv2_.w, y256_.data(), d_.dim, epilogue{}, [&](int r0, int rows) {
        ln_silu(y256_.data(), d_.dim, r0, rows, d_.dim, cv2_);
        layernorm(y256_.data() + sz(r0, d_.dim), d_.dim, memory_.data() + sz(r0, d_.dim), d_.dim, rows, d_.dim, proj_ln_g_,
                  proj_ln_b_, k_eps_vit);
    });
}

void model::run_two_stage() {
    // mem2 = LN(enc_output(memory)); class logits; box MLP deltas on the fixed 40x40 proposals.
    linear(memory_.data(), d_.dim, d_.pixels, enc_w_, mem2_.data(), d_.dim, with_bias(epi::bias, enc_b_), [&](int r0, int rows) {
        layernorm(mem2_.data() + sz(r0, d_.dim), d_.dim, mem2_.data() + sz(r0, d_.dim), d_.dim, rows, d_.dim, enc_ln_g_,
                  enc_ln_b_, k_eps_dec);
    });
    linear(mem2_.data(), d_.dim, d_.pixels, enc_cls_w_, enc_cls_.data(), nc_, with_bias(epi::bias, enc_cls_b_));
    linear(mem2_.data(), d_.dim, d_.pixels, enc_box_w_[0], enc_h1_.data(), d_.dim, with_bias(epi::bias_relu, enc_box_b_[0]));
    linear(enc_h1_.data(), d_.dim, d_.pixels, enc_box_w_[1], enc_h2_.data(), d_.dim, with_bias(epi::bias_relu, enc_box_b_[1]));
    linear(enc_h2_.data(), d_.dim, d_.pixels, enc_box_w_[2], enc_delta_.data(), 4, with_bias(epi::bias, enc_box_b_[2]));
    const float wh = 0.05f;
    for (int pix = 0; pix < d_.pixels; ++pix) {
        const float   px = (static_cast<float>(pix % d_.grid) + 0.5f) / static_cast<float>(d_.grid);
        const float   py = (static_cast<float>(pix / d_.grid) + 0.5f) / static_cast<float>(d_.grid);
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
        topk(scores_.data(), d_.pixels, d_.queries, topk_.data(), topk_scratch_.data());
    }
    // Reference boxes: query slot i pairs refpoint_embed[i] with the rank-i proposal.
    for (int i = 0; i < d_.queries; ++i) {
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
    for (int i = 0; i < d_.queries; ++i) {
        for (int b = 0; b < 4; ++b) {
            const float e = ref_[sz(i, 4) + order[b]] * two_pi;
            float *     o = sine_.data() + sz(i, 2 * d_.dim) + b * 128;
            for (int j = 0; j < 128; j += 2) {
                o[j]     = std::sin(e / dim_t[j]);
                o[j + 1] = std::cos(e / dim_t[j + 1]);
            }
        }
    }
    linear(sine_.data(), 2 * d_.dim, d_.queries, rph_w_[0], qp_h_.data(), d_.dim, with_bias(epi::bias_relu, rph_b_[0]));
    linear(qp_h_.data(), d_.dim, d_.queries, rph_w_[1], query_pos_.data(), d_.dim, with_bias(epi::bias, rph_b_[1]));

    // The memory's value projections for all three layers in one GEMM: [1600, 768].
    linear(memory_.data(), d_.dim, d_.pixels, value_w_, value_.data(), d_.dec_layers * d_.dim,
           with_bias(epi::bias, value_b_.data()));

    std::memcpy(tgt_.data(), query_feat_, sz(d_.queries, d_.dim) * 4);
    const float inv_sqrt_dim = std::sqrt(static_cast<float>(d_.sa_dim));
    for (int l = 0; l < d_.dec_layers; ++l) {
        const dec_layer & d = dec_[l];
        // Self-attention: q = k = tgt + query_pos, v = tgt; torch 1.13 divides q by sqrt(32) before q k^T.
        for (size_t i = 0; i < tgt_.size(); ++i) qin_[i] = tgt_[i] + query_pos_[i];
        linear(qin_.data(), d_.dim, d_.queries, d.in_qk, qk_.data(), 2 * d_.dim, with_bias(epi::bias, d.in_b), [&](int r0, int rows) {
            for (int r = r0; r < r0 + rows; ++r) {
                for (int c = 0; c < d_.dim; ++c) qk_[sz(r, 2 * d_.dim) + c] /= inv_sqrt_dim;
            }
        });
        linear(tgt_.data(), d_.dim, d_.queries, d.in_v, v_.data(), d_.dim, with_bias(epi::bias, d.in_b + 2 * d_.dim));
        pool_.parallel_for(d_.sa_heads, [&](int hd, int thread) {
            const float * q = qk_.data() + hd * d_.sa_dim, *k = q + d_.dim, *v = v_.data() + hd * d_.sa_dim;
            float *       o = attn_.data() + hd * d_.sa_dim;
            head_attention(bf16_attn_, q, 2 * d_.dim, k, 2 * d_.dim, v, d_.dim, o, d_.dim, d_.queries, d_.queries, d_.sa_dim,
                           1.0f, att_scratch(thread));
        });
        linear(attn_.data(), d_.dim, d_.queries, d.out, tgt_.data(), d_.dim, with_bias(epi::bias_residual, d.out_b));
        layernorm(tgt_.data(), d_.dim, tgt_.data(), d_.dim, d_.queries, d_.dim, d.n1_g, d.n1_b, k_eps_dec);

        // Deformable cross-attention: 16 heads x 1 level x 2 points over the 40x40 memory.
        for (size_t i = 0; i < tgt_.size(); ++i) qin_[i] = tgt_[i] + query_pos_[i];
        linear(qin_.data(), d_.dim, d_.queries, d.off, off_.data(), d_.ca_heads * d_.ca_points * 2, with_bias(epi::bias, d.off_b));
        linear(qin_.data(), d_.dim, d_.queries, d.aw, aw_.data(), d_.ca_heads * d_.ca_points, with_bias(epi::bias, d.aw_b));
        softmax_rows(aw_.data(), d_.ca_points, d_.queries * d_.ca_heads, d_.ca_points);
        std::fill(samp_.begin(), samp_.end(), 0.0f);
        const float * value = value_.data() + l * d_.dim;
        pool_.parallel_for(d_.queries, [&](int i, int) {
            const float * r = ref_.data() + sz(i, 4);
            for (int hd = 0; hd < d_.ca_heads; ++hd) {
                for (int p = 0; p < d_.ca_points; ++p) {
                    const float * o  = off_.data() + sz(i, d_.ca_heads * d_.ca_points * 2) + (hd * d_.ca_points + p) * 2;
                    const float   lx = r[0] + o[0] / static_cast<float>(d_.ca_points) * r[2] * 0.5f;
                    const float   ly = r[1] + o[1] / static_cast<float>(d_.ca_points) * r[3] * 0.5f;
                    const float   a  = aw_[sz(i, d_.ca_heads * d_.ca_points) + hd * d_.ca_points + p];
                    bilinear_sample_accumulate(value + hd * d_.ca_dim, d_.dec_layers * d_.dim, d_.grid, d_.grid, lx, ly, a,
                                               d_.ca_dim, samp_.data() + sz(i, d_.dim) + hd * d_.ca_dim);
                }
            }
        });
        linear(samp_.data(), d_.dim, d_.queries, d.outp, tgt_.data(), d_.dim, with_bias(epi::bias_residual, d.outp_b));
        layernorm(tgt_.data(), d_.dim, tgt_.data(), d_.dim, d_.queries, d_.dim, d.n2_g, d.n2_b, k_eps_dec);

        // FFN 256 -> 2048 -> 256 (ReLU), residual, norm3.
        linear(tgt_.data(), d_.dim, d_.queries, d.l1, ffn_.data(), d_.ffn, with_bias(epi::bias_relu, d.l1_b));
        linear(ffn_.data(), d_.ffn, d_.queries, d.l2, tgt_.data(), d_.dim, with_bias(epi::bias_residual, d.l2_b));
        layernorm(tgt_.data(), d_.dim, tgt_.data(), d_.dim, d_.queries, d_.dim, d.n3_g, d.n3_b, k_eps_dec);
        std::memcpy(layer_out_.data() + sz(l * d_.queries, d_.dim), tgt_.data(), tgt_.size() * 4);
    }
}

void model::run_heads(float * logits, float * boxes) {
    layernorm(tgt_.data(), d_.dim, hs_.data(), d_.dim, d_.queries, d_.dim, dec_norm_g_, dec_norm_b_, k_eps_dec);
    linear(hs_.data(), d_.dim, d_.queries, cls_w_, logits, nc_, with_bias(epi::bias, cls_b_));
    linear(hs_.data(), d_.dim, d_.queries, box_w_[0], head_h1_.data(), d_.dim, with_bias(epi::bias_relu, box_b_[0]));
    linear(head_h1_.data(), d_.dim, d_.queries, box_w_[1], head_h2_.data(), d_.dim, with_bias(epi::bias_relu, box_b_[1]));
    linear(head_h2_.data(), d_.dim, d_.queries, box_w_[2], head_delta_.data(), 4, with_bias(epi::bias, box_b_[2]));
    for (int i = 0; i < d_.queries; ++i) {
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
