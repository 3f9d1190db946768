#include "engines/tt/tt-mask-head.h"

#include "engines/engine.h"
#include "model/checkpoint.h"

namespace rfdetr {
namespace tt {

namespace {

const std::string k_seg     = "segmentation_head.";
constexpr float   k_eps_blk = 1e-6f;  // DepthwiseConvBlock's LayerNorm
constexpr float   k_eps_mlp = 1e-5f;  // MLPBlock's norm_in
constexpr int     k_tile    = 32;     // rows per device tile: K is padded to a multiple of it

const float * tensor_of(const checkpoint & ck, const std::string & name, const tt_shape & expect) {
    const tensor_view & t = ck.get(name);
    if (tt_shape(t.shape.begin(), t.shape.end()) != expect) {
        throw error("tt_mask_head: checkpoint tensor " + name + " has shape " + tt_shape_str(tt_shape(t.shape.begin(), t.shape.end())) +
                    ", expected " + tt_shape_str(expect) + "; the checkpoint does not match its variant's schema");
    }
    return t.data;
}

// torch Linear weight [out, in] -> [in, out]
std::vector<float> transposed(const float * w, int64_t out, int64_t in) {
    std::vector<float> t((size_t)out * in);
    for (int64_t o = 0; o < out; ++o) {
        for (int64_t i = 0; i < in; ++i) {
            t[(size_t)i * out + o] = w[o * in + i];
        }
    }
    return t;
}

}  // namespace

tt_tensor tt_mask_head::up(const std::vector<float> & v, const tt_shape & shape) {
    return ops_.upload(v.data(), shape, weights_fp32_ ? TT_DTYPE_FP32 : TT_DTYPE_BF16);
}

tt_mask_head::tt_mask_head(tt_ops & ops, const checkpoint & ck, const tt_dims & d, int mask_side, int blocks, int num_queries,
                           const tt_math & math, bool weights_fp32)
    : ops_(ops), math_(math), grid_(d.grid), side_(mask_side), d_model_(d.d_model), num_queries_(num_queries), weights_fp32_(weights_fp32) {
    if (side_ <= 0 || side_ % grid_ != 0) {
        throw error("tt_mask_head: the mask side " + std::to_string(side_) + " is not an integer multiple of the patch grid " +
                    std::to_string(grid_) + "; the TT graph's upsample takes integer scales only (every RF-DETR Seg size has 3)");
    }
    scale_ = side_ / grid_;

    const int64_t C   = d_model_;
    auto          vec = [&](const std::string & name, int64_t n) {
        const float * p = tensor_of(ck, name, {n});
        return up(std::vector<float>(p, p + n), {1, n});
    };
    auto lin = [&](const std::string & name, int64_t out, int64_t in, tt_tensor & w, tt_tensor & b) {
        w = up(transposed(tensor_of(ck, name + ".weight", {out, in}), out, in), {in, out});
        b = vec(name + ".bias", out);
    };
    for (int i = 0; i < blocks; ++i) {
        const std::string p = k_seg + "blocks." + std::to_string(i) + ".";
        block             b;
        const float * dw = tensor_of(ck, p + "dwconv.weight", {C, 1, 3, 3});
        b.dw_w           = up(std::vector<float>(dw, dw + C * 9), {C, 1, 3, 3});
        b.dw_b           = vec(p + "dwconv.bias", C);
        b.ln_w           = vec(p + "norm.weight", C);
        b.ln_b           = vec(p + "norm.bias", C);
        lin(p + "pwconv1", C, C, b.pw_w, b.pw_b);
        blocks_.push_back(b);
    }
    {
        const float * pw = tensor_of(ck, k_seg + "spatial_features_proj.weight", {C, C, 1, 1});
        proj_w_          = up(transposed(pw, C, C), {C, C});
        proj_b_          = vec(k_seg + "spatial_features_proj.bias", C);
    }
    const std::string qb = k_seg + "query_features_block.";
    qn_w_                = vec(qb + "norm_in.weight", C);
    qn_b_                = vec(qb + "norm_in.bias", C);
    const int64_t hidden = ck.get(qb + "layers.0.weight").shape.at(0);
    lin(qb + "layers.0", hidden, C, q1_w_, q1_b_);
    lin(qb + "layers.2", C, hidden, q2_w_, q2_b_);
    lin(k_seg + "query_features_proj", C, C, qp_w_, qp_b_);
    bias_ = up(std::vector<float>{tensor_of(ck, k_seg + "bias", {1})[0]}, {1, 1});
    ones_ = up(std::vector<float>((size_t)C, 1.0f), {1, C});
}

void tt_mask_head::build(const tt_tensor & memory, const tt_tensor & hs, std::map<std::string, tt_tensor> & taps) {
    auto &        ops = ops_;
    const int64_t C = d_model_, M = side_;
    ops.set_math(math_);

    // spatial features at R/4, channels-last [1, M, M, C]
    tt_tensor x = ops.upsample_bilinear(ops.reshape(memory, {1, grid_, grid_, C}), scale_);
    taps["seg.spatial_upsampled"] = x;
    for (size_t i = 0; i < blocks_.size(); ++i) {
        const block & b = blocks_[i];
        tt_tensor     y = ops.add(ops.conv2d_depthwise(x, b.dw_w, 3, 1), b.dw_b);
        y               = ops.gelu(ops.linear(ops.layer_norm(y, b.ln_w, b.ln_b, k_eps_blk), b.pw_w, b.pw_b, TT_ACT_NONE));
        x               = ops.add(x, y);
        taps["seg.block_out." + std::to_string(i)] = x;
    }
    tt_tensor s = ops.linear(x, proj_w_, proj_b_, TT_ACT_NONE);
    taps["seg.spatial_proj"] = s;
    s_t_ = ops.permute(ops.reshape(s, {M * M, C}), {1, 0});  // [C, M*M]: the mask matmul's in1

    // query features for every query: hs + MLP(LN(hs)), then the projection
    tt_tensor h = ops.gelu(ops.linear(ops.layer_norm(hs, qn_w_, qn_b_, k_eps_mlp), q1_w_, q1_b_, TT_ACT_NONE));
    h           = ops.linear_addcmul(h, q2_w_, q2_b_, hs, ones_);
    tt_tensor q = ops.linear(h, qp_w_, qp_b_, TT_ACT_NONE);  // [1, Q, C]
    taps["seg.query_features"] = q;
    q_ = ops.reshape(q, {num_queries_, C});
}

void tt_mask_head::masks(const std::vector<int> & rows, float * out) {
    if (!q_ || !s_t_) {
        throw error("tt_mask_head::masks: the head was not built; run the graph first");
    }
    const int64_t K = (int64_t)rows.size(), MM = (int64_t)side_ * side_;
    if (K == 0) {
        return;
    }
    for (int r : rows) {
        if (r < 0 || r >= num_queries_) {
            throw error("tt_mask_head::masks: query index " + std::to_string(r) + " is outside 0.." + std::to_string(num_queries_ - 1));
        }
    }
    std::vector<int> padded(rows);
    padded.resize((size_t)((K + k_tile - 1) / k_tile * k_tile), rows[0]);
    const int64_t Kp = (int64_t)padded.size();

    // pred_masks in fp32 (the product of two bf16 activations, accumulated in fp32; the threshold at 0 needs the
    // small logits, which a bf16 output would round to 2^-8 relative)
    tt_math m  = math_;
    m.out_fp32 = true;
    ops_.set_math(m);
    tt_tensor qk  = ops_.reshape(ops_.gather_rows(q_, ops_.upload_indices(padded)), {Kp, d_model_});
    tt_tensor res = ops_.add(ops_.matmul(qk, s_t_), bias_);  // [Kp, M*M]
    ops_.set_math(math_);
    std::vector<float> all((size_t)(Kp * MM));
    ops_.read(res, all.data());
    std::copy(all.begin(), all.begin() + K * MM, out);
}

}  // namespace tt
}  // namespace rfdetr
