#include "engines/tt/tt-graph.h"

#include "engines/engine.h"
#include "engines/tt/tt-mask-head.h"
#include "engines/tt/tt-prep.h"
#include "model/checkpoint.h"

#include <algorithm>
#include <cmath>

namespace rfdetr {
namespace tt {

namespace {

const std::string k_vit    = "backbone.0.encoder.encoder.";
const std::string k_proj   = "backbone.0.projector.stages.0.";
const std::string k_tf     = "transformer.";
constexpr float   k_eps_vit     = 1e-6f;
constexpr float   k_eps_dec     = 1e-5f;

const float * weight(const checkpoint & ck, const std::string & name, int64_t expect_numel) {
    const tensor_view & t = ck.get(name);
    int64_t             n = 1;
    for (int64_t d : t.shape) {
        n *= d;
    }
    if (n != expect_numel) {
        throw error("tt_graph: checkpoint tensor " + name + " has " + std::to_string(n) + " values, expected " +
                    std::to_string(expect_numel) + "; the checkpoint does not match its variant's schema");
    }
    return t.data;
}

std::vector<float> vec_of(const float * p, int64_t n) {
    return std::vector<float>(p, p + n);
}

tt_math math(tt_fidelity f, bool fp32_acc, bool out_fp32 = false) {
    tt_math m;
    m.fidelity = f;
    m.fp32_acc = fp32_acc;
    m.out_fp32 = out_fp32;
    return m;
}

}  // namespace

std::vector<std::string> tt_plan_names() {
    return {"uniform", "port", "port-score32", "uniform-score32", "uniform-score32-res32", "act32", "w32", "w32-act32", "device"};
}

tt_plan tt_plan_named(const std::string & name) {
    const auto names = tt_plan_names();
    if (std::find(names.begin(), names.end(), name) == names.end()) {
        std::string known;
        for (const auto & n : names) {
            known += (known.empty() ? "" : ", ") + n;
        }
        throw error("tt_plan_named: unknown precision plan '" + name + "'; known: " + known);
    }
    // "uniform": HiFi4 + fp32 accumulation everywhere, bf16 weights and activations (the single compute config
    // of the first ttnn layer; the top-k ranks bf16 scores with ttnn::topk)
    tt_plan p;
    p.name  = name;
    p.patch = p.vit = p.vit_sdpa = p.shaping = p.projector = p.scoring = p.decoder = math(TT_FIDELITY_HIFI4, true);
    if (name == "port" || name == "port-score32") {
        // changh95/tt-RF-DETR's settings: backbone minimal_matmul HiFi2 without fp32 accumulation, SDPA with
        // ttnn's default config (taken as HiFi2, no fp32 accumulation), shaping HiFi4 without fp32 accumulation;
        // patch embedding, projector and decoder HiFi4 + fp32 accumulation
        p.vit = p.vit_sdpa = math(TT_FIDELITY_HIFI2, false);
        p.shaping          = math(TT_FIDELITY_HIFI4, false);
    }
    // fp32 two-stage scores, ranked exactly in fp32
    p.scoring.out_fp32  = name != "uniform" && name != "port";
    // fp32 residual stream in the backbone
    p.vit_residual_fp32 = name == "uniform-score32-res32" || name == "w32" || name == "device";
    // fp32 weights and constants (a matmul reads in1 through SrcA: 8 mantissa bits instead of bf16's 7, rounded
    // from fp32 instead of stored rounded)
    p.weights_fp32      = name == "w32" || name == "w32-act32" || name == "device";
    if (name == "act32" || name == "w32-act32") {
        // diagnostic bounds, not device plans: every activation fp32
        tt_math a32 = math(TT_FIDELITY_HIFI4, true, true);
        p.patch = p.vit = p.vit_sdpa = p.shaping = p.projector = p.scoring = p.decoder = a32;
        p.vit_residual_fp32 = true;
    }
    return p;
}

tt_tensor tt_graph::up(const std::vector<float> & data, const tt_shape & shape, tt_dtype dtype) {
    if ((int64_t)data.size() != tt_numel(shape)) {
        throw error("tt_graph::up: " + std::to_string(data.size()) + " values for shape " + tt_shape_str(shape));
    }
    return ops_.upload(data.data(), shape, plan_.weights_fp32 ? TT_DTYPE_FP32 : dtype);
}

tt_graph::linear_w tt_graph::up_linear(const checkpoint & ck, const std::string & prefix) {
    const tensor_view & w = ck.get(prefix + ".weight");
    if (w.shape.size() != 2) {
        throw error("tt_graph: " + prefix + ".weight is not a matrix");
    }
    int out = (int)w.shape[0], in = (int)w.shape[1];
    linear_w l;
    l.w = up(tt_transpose(w.data, out, in), {in, out});
    l.b = up(vec_of(weight(ck, prefix + ".bias", out), out), {1, out});
    return l;
}

tt_graph::norm_w tt_graph::up_norm(const checkpoint & ck, const std::string & prefix) {
    const tensor_view & w = ck.get(prefix + ".weight");
    int64_t             n = w.shape.back();
    return {up(vec_of(w.data, n), {1, n}), up(vec_of(weight(ck, prefix + ".bias", n), n), {1, n})};
}

tt_tensor tt_graph::up_vec(const checkpoint & ck, const std::string & name) {
    const tensor_view & t = ck.get(name);
    int64_t             n = t.shape.back();
    return up(vec_of(t.data, n), {1, n});
}

tt_graph::tt_graph(tt_ops & ops, const checkpoint & ck, const tt_plan & plan)
    : ops_(ops), plan_(plan), arch_(ck.variant().arch), dims_(tt_dims_of(ck.variant().arch)) {
    num_classes_ = ck.num_classes();
    num_queries_ = arch_.num_queries;
    ops_.set_math(plan_.decoder);

    // ---- backbone ----
    {
        const std::string e  = k_vit + "embeddings.";
        const float *     cw = weight(ck, e + "patch_embeddings.projection.weight", (int64_t)dims_.hidden * dims_.patch_k);
        const float *     cb = weight(ck, e + "patch_embeddings.projection.bias", dims_.hidden);
        const float *     pe = weight(ck, e + "position_embeddings", (int64_t)(1 + dims_.pos_grid * dims_.pos_grid) * dims_.hidden);
        const float *     cl = weight(ck, e + "cls_token", dims_.hidden);
        patch_w_             = up(tt_patch_kernel(dims_, cw), {dims_.patch_k_pad, dims_.hidden});
        cls_pos_ = up(tt_cls_pos(dims_, cl, tt_pos_interp(dims_, pe).data(), cb), {dims_.num_windows, dims_.window_seq, dims_.hidden});
        ones384_ = up(std::vector<float>(dims_.hidden, 1.0f), {1, dims_.hidden});
        perm_    = up(tt_shaping_perm(dims_), {dims_.patches, dims_.tokens});
    }
    for (int i = 0; i < arch_.blocks_used(); ++i) {
        const std::string p = k_vit + "encoder.layer." + std::to_string(i) + ".";
        vit_layer         l;
        l.global = arch_.is_global(i);
        l.norm1  = up_norm(ck, p + "norm1");
        l.norm2  = up_norm(ck, p + "norm2");
        // fused qkv: [384, 1152] with columns q | k | v
        std::vector<float> w((size_t)dims_.hidden * 3 * dims_.hidden), b(3 * dims_.hidden);
        const char *       parts[3] = {"query", "key", "value"};
        for (int part = 0; part < 3; ++part) {
            const std::string a  = p + "attention.attention." + parts[part];
            const float *     pw = weight(ck, a + ".weight", (int64_t)dims_.hidden * dims_.hidden);
            const float *     pb = weight(ck, a + ".bias", dims_.hidden);
            for (int o = 0; o < dims_.hidden; ++o) {
                for (int in = 0; in < dims_.hidden; ++in) {
                    w[(size_t)in * 3 * dims_.hidden + part * dims_.hidden + o] = pw[(size_t)o * dims_.hidden + in];
                }
                b[part * dims_.hidden + o] = pb[o];
            }
        }
        l.qkv  = {up(w, {dims_.hidden, 3 * dims_.hidden}), up(b, {1, 3 * dims_.hidden})};
        l.proj = up_linear(ck, p + "attention.output.dense");
        l.fc1  = up_linear(ck, p + "mlp.fc1");
        l.fc2  = up_linear(ck, p + "mlp.fc2");
        l.ls1  = up_vec(ck, p + "layer_scale1.lambda1");
        l.ls2  = up_vec(ck, p + "layer_scale2.lambda1");
        vit_.push_back(l);
    }
    vit_final_ = up_norm(ck, k_vit + "layernorm");

    // ---- projector: 1x1 convs as linears [in, out], 3x3 convs in torch layout for conv2d ----
    {
        const int c1 = (int)arch_.out_feature_indexes.size() * dims_.hidden, c2 = dims_.d_model, ch = dims_.d_model / 2;
        cv1_w_  = up(tt_transpose(weight(ck, k_proj + "0.cv1.conv.weight", (int64_t)c2 * c1), c2, c1), {c1, c2});
        cv1_ln_ = up_norm(ck, k_proj + "0.cv1.bn");
        const int cat = (2 + arch_.c2f_blocks) * ch;  // cat[y0, y1, m0, m1, m2]
        cv2_w_  = up(tt_transpose(weight(ck, k_proj + "0.cv2.conv.weight", (int64_t)c2 * cat), c2, cat), {cat, c2});
        cv2_ln_ = up_norm(ck, k_proj + "0.cv2.bn");
        for (int i = 0; i < arch_.c2f_blocks; ++i) {
            for (int j = 1; j <= 2; ++j) {
                const std::string p = k_proj + "0.m." + std::to_string(i) + ".cv" + std::to_string(j);
                m_w_.push_back(up(vec_of(weight(ck, p + ".conv.weight", (int64_t)ch * ch * 9), (int64_t)ch * ch * 9), {ch, ch, 3, 3}));
                m_ln_.push_back(up_norm(ck, p + ".bn"));
            }
        }
        out_ln_ = up_norm(ck, k_proj + "1");
    }

    // ---- two-stage (group 0) ----
    enc_output_ = up_linear(ck, k_tf + "enc_output.0");
    enc_norm_   = up_norm(ck, k_tf + "enc_output_norm.0");
    enc_class_  = up_linear(ck, k_tf + "enc_out_class_embed.0");
    for (int i = 0; i < 3; ++i) {
        enc_bbox_.push_back(up_linear(ck, k_tf + "enc_out_bbox_embed.0.layers." + std::to_string(i)));
    }
    prop_xy0_ = up(tt_proposals_xy0(dims_), {1, dims_.patches, 4});
    prop_whd_ = up(tt_proposals_whd(dims_), {1, dims_.patches, 4});
    mask_xy_  = up(tt_mask_xy(), {1, 1, 4});
    t_xy0_    = up(tt_t_xy0(), {4, 4});
    t_wh4_    = up(tt_t_wh4(), {4, 4});
    {
        tt_tensor rp = up(vec_of(weight(ck, "refpoint_embed.weight", (int64_t)arch_.group_detr * num_queries_ * 4), (int64_t)num_queries_ * 4),
                          {1, num_queries_, 4});
        // [rp_x, rp_y, exp(rp_w), exp(rp_h)]: the refpoint deltas are constants, so this runs once at load.
        refpoint_t_ = ops_.where(mask_xy_, rp, ops_.exp(rp));
        target_     = up(vec_of(weight(ck, "query_feat.weight", (int64_t)arch_.group_detr * num_queries_ * dims_.d_model),
                                (int64_t)num_queries_ * dims_.d_model),
                         {1, num_queries_, dims_.d_model});
    }

    // ---- decoder ----
    sine_t_       = up(tt_sine_table(), {4, 4 * k_num_pos_feats});
    sine_even_    = up(tt_sine_even_mask(), {1, 1, 4 * k_num_pos_feats});
    grid_xy2_     = up(tt_grid_xy2(dims_), {4, 2 * dims_.cross_heads * dims_.cross_points});
    grid_wh_half_ = up(tt_grid_wh_half(dims_), {4, 2 * dims_.cross_heads * dims_.cross_points});
    grid_neg1_    = up(tt_grid_neg1(dims_), {1, 2 * dims_.cross_heads * dims_.cross_points});
    ones256_      = up(std::vector<float>(dims_.d_model, 1.0f), {1, dims_.d_model});
    ones768_      = up(std::vector<float>(3 * dims_.d_model, 1.0f), {1, 3 * dims_.d_model});
    for (int i = 0; i < 2; ++i) {
        ref_head_.push_back(up_linear(ck, k_tf + "decoder.ref_point_head.layers." + std::to_string(i)));
    }
    for (int i = 0; i < arch_.dec_layers; ++i) {
        const std::string p = k_tf + "decoder.layers." + std::to_string(i) + ".";
        dec_layer         l;
        const int         d   = dims_.d_model;
        const float *     inw = weight(ck, p + "self_attn.in_proj_weight", (int64_t)3 * d * d);
        const float *     inb = weight(ck, p + "self_attn.in_proj_bias", 3 * d);
        l.sa_qkv              = {up(tt_transpose(inw, 3 * d, d), {d, 3 * d}), up(vec_of(inb, 3 * d), {1, 3 * d})};
        // pos term weight: the q and k rows of in_proj, zero for v (v does not see query_pos)
        std::vector<float> pw = tt_transpose(inw, 3 * d, d);
        for (int in = 0; in < d; ++in) {
            for (int o = 2 * d; o < 3 * d; ++o) {
                pw[(size_t)in * 3 * d + o] = 0.0f;
            }
        }
        l.sa_pos_w = up(pw, {d, 3 * d});
        l.sa_out   = up_linear(ck, p + "self_attn.out_proj");
        l.norm1    = up_norm(ck, p + "norm1");
        l.offsets  = up_linear(ck, p + "cross_attn.sampling_offsets");
        l.attn_w   = up_linear(ck, p + "cross_attn.attention_weights");
        l.value    = up_linear(ck, p + "cross_attn.value_proj");
        l.out_proj = up_linear(ck, p + "cross_attn.output_proj");
        l.norm2    = up_norm(ck, p + "norm2");
        l.l1       = up_linear(ck, p + "linear1");
        l.l2       = up_linear(ck, p + "linear2");
        l.norm3    = up_norm(ck, p + "norm3");
        dec_.push_back(l);
    }
    dec_norm_    = up_norm(ck, k_tf + "decoder.norm");
    class_embed_ = up_linear(ck, "class_embed");
    for (int i = 0; i < 3; ++i) {
        bbox_embed_.push_back(up_linear(ck, "bbox_embed.layers." + std::to_string(i)));
    }

    // ---- mask head (RF-DETR Seg): the decoder's numerics ----
    if (arch_.segment()) {
        seg_ = std::make_unique<tt_mask_head>(ops_, ck, dims_, arch_.mask_side(), arch_.mask_blocks, num_queries_, plan_.decoder,
                                              plan_.weights_fp32);
    }

    // The persistent input the trace reads; fp32 (the bf16 patch matmul loses the embed-level accuracy
    // the detection-IoU gate needs when the pixels are uploaded in bf16, per the Python port's measurements).
    input_ = up(std::vector<float>((size_t)dims_.tokens * dims_.patch_k_pad, 0.0f), {dims_.num_windows, dims_.window_seq, dims_.patch_k_pad},
                TT_DTYPE_FP32);
}

bool tt_graph::set_topk_override(const std::vector<int> & indices) {
    if (indices.empty()) {
        bool had = (bool)topk_override_;
        topk_override_.reset();
        return had;
    }
    if ((int)indices.size() != num_queries_) {
        throw error("tt_graph::set_topk_override: expected " + std::to_string(num_queries_) + " indices, got " +
                    std::to_string(indices.size()));
    }
    std::vector<float> v(indices.begin(), indices.end());
    if (topk_override_) {
        ops_.write(topk_override_, v.data());
        return false;
    }
    topk_override_ = ops_.upload(v.data(), {1, num_queries_}, TT_DTYPE_FP32);
    return true;
}

tt_tensor tt_graph::conv_ln_silu(const tt_tensor & x, const tt_tensor & conv_w, const norm_w & ln, int kernel) {
    tt_tensor y = kernel == 1 ? ops_.linear(x, conv_w, nullptr, TT_ACT_NONE)
                              : ops_.reshape(ops_.conv2d(ops_.reshape(x, {1, dims_.grid, dims_.grid, x->shape.back()}), conv_w, kernel, kernel / 2),
                                             {1, dims_.patches, conv_w->shape[0]});
    return ops_.silu(ops_.layer_norm(y, ln.w, ln.b, k_eps_vit));
}

tt_tensor tt_graph::mlp3(const tt_tensor & x, const std::vector<linear_w> & layers) {
    tt_tensor h = x;
    for (size_t i = 0; i < layers.size(); ++i) {
        h = ops_.linear(h, layers[i].w, layers[i].b, i + 1 < layers.size() ? TT_ACT_RELU : TT_ACT_NONE);
    }
    return h;
}

tt_graph::outputs tt_graph::build() {
    outputs out;
    auto &  ops = ops_;

    const tt_plan & pl = plan_;
    tt_math         res = pl.vit;  // the fused matmul + layerscale + residual ops: the residual stream's dtype
    res.out_fp32        = pl.vit_residual_fp32;

    // ---- backbone: patch embedding as one matmul over the im2col input, plus the cls/pos constant ----
    tt_math patch = pl.patch;
    patch.out_fp32 = pl.vit_residual_fp32;
    ops.set_math(patch);
    tt_tensor x = ops.linear_addcmul(input_, patch_w_, nullptr, cls_pos_, ones384_);  // [16,101,384]
    out.taps["backbone.embeddings"] = x;
    std::vector<tt_tensor> taps;
    for (int i = 0; i < arch_.blocks_used(); ++i) {
        const vit_layer & l = vit_[i];
        if (l.global) {
            x = ops.reshape(x, {1, dims_.tokens, dims_.hidden});  // the 16 windows (with their cls copies) as one sequence
        }
        ops.set_math(pl.vit);
        tt_tensor h   = ops.layer_norm(x, l.norm1.w, l.norm1.b, k_eps_vit);
        tt_tensor qkv = ops.linear(h, l.qkv.w, l.qkv.b, TT_ACT_NONE);
        auto      hv  = ops.split_heads(qkv, arch_.vit_heads);
        ops.set_math(pl.vit_sdpa);
        tt_tensor a   = ops.concat_heads(ops.sdpa(hv[0], hv[1], hv[2], 1.0f / std::sqrt((float)(dims_.hidden / arch_.vit_heads))));
        ops.set_math(res);
        x             = ops.linear_addcmul(a, l.proj.w, l.proj.b, x, l.ls1);
        ops.set_math(pl.vit);
        h             = ops.layer_norm(x, l.norm2.w, l.norm2.b, k_eps_vit);
        h             = ops.gelu(ops.linear(h, l.fc1.w, l.fc1.b, TT_ACT_NONE));
        ops.set_math(res);
        x             = ops.linear_addcmul(h, l.fc2.w, l.fc2.b, x, l.ls2);
        if (l.global) {
            x = ops.reshape(x, {dims_.num_windows, dims_.window_seq, dims_.hidden});
        }
        if (arch_.tap_of_block(i) >= 0) {
            // drop the cls rows and un-window in one 0/1 matmul; LayerNorm is per row, so it commutes
            ops.set_math(pl.shaping);
            tt_tensor f = ops.matmul(perm_, ops.reshape(x, {dims_.tokens, dims_.hidden}));
            f           = ops.layer_norm(ops.reshape(f, {1, dims_.patches, dims_.hidden}), vit_final_.w, vit_final_.b, k_eps_vit);
            out.taps["backbone.feature_map." + std::to_string(taps.size())] = f;
            taps.push_back(f);
        }
    }

    // ---- projector (C2f, channels-last [1,1600,C]) ----
    ops.set_math(pl.projector);
    tt_tensor y  = conv_ln_silu(ops.concat_last(taps), cv1_w_, cv1_ln_, 1);  // [1,1600,256]
    const int ch = dims_.d_model / 2;
    std::vector<tt_tensor> parts = {ops.slice_last(y, 0, ch), ops.slice_last(y, ch, 2 * ch)};
    tt_tensor              m     = parts[1];
    for (int i = 0; i < arch_.c2f_blocks; ++i) {
        m = conv_ln_silu(m, m_w_[2 * i], m_ln_[2 * i], 3);
        m = conv_ln_silu(m, m_w_[2 * i + 1], m_ln_[2 * i + 1], 3);
        parts.push_back(m);
    }
    tt_tensor memory = conv_ln_silu(ops.concat_last(parts), cv2_w_, cv2_ln_, 1);
    memory           = ops.layer_norm(memory, out_ln_.w, out_ln_.b, k_eps_vit);  // [1,1600,256]
    out.taps["projector.out"] = memory;

    // ---- two-stage proposals and top-k ----
    ops.set_math(pl.scoring);
    tt_tensor oq = ops.layer_norm(ops.linear(memory, enc_output_.w, enc_output_.b, TT_ACT_NONE), enc_norm_.w, enc_norm_.b, k_eps_dec);
    tt_tensor enc_class = ops.linear(oq, enc_class_.w, enc_class_.b, TT_ACT_NONE);  // [1,1600,C]
    tt_tensor scores    = ops.reshape(ops.max(enc_class), {1, dims_.patches});
    ops.set_math(pl.decoder);
    tt_tensor delta     = mlp3(oq, enc_bbox_);                                       // [1,1600,4]
    tt_tensor enc_coord = ops.add(ops.multiply(ops.where(mask_xy_, delta, ops.exp(delta)), prop_whd_), prop_xy0_);
    out.taps["two_stage.enc_class_logits"] = enc_class;
    out.taps["two_stage.enc_coords"]       = enc_coord;
    tt_tensor idx = topk_override_ ? topk_override_ : ops.topk_indices(scores, num_queries_);
    out.taps["two_stage.topk_indices"] = idx;
    tt_tensor ts  = ops.gather_rows(ops.reshape(enc_coord, {dims_.patches, 4}), idx);  // [1,Q,4]
    tt_tensor ref = ops.add(ops.multiply(refpoint_t_, ops.linear(ts, t_wh4_, nullptr, TT_ACT_NONE)),
                            ops.linear(ts, t_xy0_, nullptr, TT_ACT_NONE));
    out.taps["decoder.reference_points"] = ref;

    // ---- query position (computed once: lite refpoint refine) and the sampling-grid tables ----
    tt_tensor full      = ops.linear(ref, sine_t_, nullptr, TT_ACT_NONE);  // [1,Q,512]
    tt_tensor sine      = ops.where(sine_even_, ops.sin(full), ops.cos(full));
    tt_tensor query_pos = ops.linear(ops.linear(sine, ref_head_[0].w, ref_head_[0].b, TT_ACT_RELU), ref_head_[1].w,
                                     ref_head_[1].b, TT_ACT_NONE);
    out.taps["decoder.query_pos"] = query_pos;
    tt_tensor ref_b = ops.linear(ref, grid_xy2_, grid_neg1_, TT_ACT_NONE);  // 2*ref_xy - 1
    tt_tensor ref_s = ops.linear(ref, grid_wh_half_, nullptr, TT_ACT_NONE);  // 0.5*ref_wh

    // ---- decoder ----
    const int Q = num_queries_, M = dims_.cross_heads, D = dims_.d_model / dims_.cross_heads, P = dims_.cross_points;
    tt_tensor hidden = target_;
    for (size_t li = 0; li < dec_.size(); ++li) {
        const dec_layer & l = dec_[li];
        // value per head, channels-last [16,40,40,16]
        tt_tensor value = ops.linear(memory, l.value.w, l.value.b, TT_ACT_NONE);
        value = ops.reshape(ops.permute(ops.reshape(value, {1, dims_.patches, M, D}), {0, 2, 1, 3}), {M, dims_.grid, dims_.grid, D});

        // self-attention: q = k = hidden + query_pos, v = hidden, as hidden @ Wqkv + b + query_pos @ [Wq|Wk|0]
        tt_tensor pos_term = ops.linear(query_pos, l.sa_pos_w, nullptr, TT_ACT_NONE);
        tt_tensor qkv      = ops.linear_addcmul(hidden, l.sa_qkv.w, l.sa_qkv.b, pos_term, ones768_);
        auto      hv       = ops.split_heads(qkv, arch_.sa_heads);
        tt_tensor ctx      = ops.concat_heads(ops.sdpa(hv[0], hv[1], hv[2], 1.0f / std::sqrt((float)(dims_.d_model / arch_.sa_heads))));
        hidden = ops.layer_norm(ops.linear_addcmul(ctx, l.sa_out.w, l.sa_out.b, hidden, ones256_), l.norm1.w, l.norm1.b, k_eps_dec);

        // deformable cross-attention
        tt_tensor query = ops.add(hidden, query_pos);
        tt_tensor aw    = ops.linear(query, l.attn_w.w, l.attn_w.b, TT_ACT_NONE);  // [1,Q,32]
        aw              = ops.softmax(ops.reshape(aw, {1, Q, M, P}));
        aw              = ops.reshape(ops.permute(aw, {0, 2, 1, 3}), {M, Q, P});
        tt_tensor grid  = ops.linear_addcmul(query, l.offsets.w, l.offsets.b, ref_b, ref_s);  // [1,Q,64] = 2*loc - 1
        grid            = ops.reshape(ops.permute(ops.reshape(grid, {Q, M, 2 * P}), {1, 0, 2}), {M, Q * P, 1, 2});
        tt_tensor ca    = ops.deformable_attn(value, grid, aw);  // [16,Q,16]
        ca              = ops.reshape(ops.permute(ca, {1, 0, 2}), {1, Q, dims_.d_model});
        hidden = ops.layer_norm(ops.linear_addcmul(ca, l.out_proj.w, l.out_proj.b, hidden, ones256_), l.norm2.w, l.norm2.b, k_eps_dec);

        // FFN
        tt_tensor f = ops.linear(hidden, l.l1.w, l.l1.b, TT_ACT_RELU);
        hidden      = ops.layer_norm(ops.linear_addcmul(f, l.l2.w, l.l2.b, hidden, ones256_), l.norm3.w, l.norm3.b, k_eps_dec);
        out.taps["decoder.layer_outputs." + std::to_string(li)] = hidden;
    }
    tt_tensor hs = ops.layer_norm(hidden, dec_norm_.w, dec_norm_.b, k_eps_dec);
    out.taps["decoder.hs_last"] = hs;
    if (seg_) {
        seg_->build(memory, hs, out.taps);
        ops.set_math(pl.decoder);
    }

    // ---- heads ----
    out.logits     = ops.linear(hs, class_embed_.w, class_embed_.b, TT_ACT_NONE);
    tt_tensor d    = mlp3(hs, bbox_embed_);
    out.pred_boxes = ops.add(ops.multiply(ops.where(mask_xy_, d, ops.exp(d)), ops.linear(ref, t_wh4_, nullptr, TT_ACT_NONE)),
                             ops.linear(ref, t_xy0_, nullptr, TT_ACT_NONE));
    return out;
}

}  // namespace tt
}  // namespace rfdetr
