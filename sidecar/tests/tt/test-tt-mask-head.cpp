// The mask head's graph (tt_mask_head) on tt-host fp32 against a direct double-precision implementation of
// upstream's SegmentationHead.forward_export, on a small fake checkpoint (C = 8, grid 3 -> mask side 9, Q = 37,
// 2 blocks): the taps, and masks() for a row list in any order with repeats and more than one 32-row tile.
#include "engines/engine.h"
#include "engines/tt/tt-mask-head.h"
#include "model/checkpoint.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>

using namespace rfdetr;
using namespace rfdetr::tt;

namespace {

constexpr int k_c = 8, k_grid = 3, k_side = 9, k_q = 37, k_hidden = 16, k_blocks = 2;

class fake_checkpoint : public checkpoint {
  public:
    fake_checkpoint() {
        std::mt19937 g(7);
        auto         add = [&](const std::string & name, std::vector<int64_t> shape, float scale) {
            schema_tensor st;
            st.name  = name;
            st.shape = shape;
            sch_.index[name] = sch_.tensors.size();
            sch_.tensors.push_back(st);
            int64_t n = 1;
            for (int64_t d : shape) n *= d;
            std::normal_distribution<float> d(0.0f, scale);
            auto &                          v = data_[name];
            v.resize((size_t)n);
            for (float & x : v) x = d(g);
        };
        const std::string s = "segmentation_head.";
        for (int i = 0; i < k_blocks; ++i) {
            const std::string p = s + "blocks." + std::to_string(i) + ".";
            add(p + "dwconv.weight", {k_c, 1, 3, 3}, 0.3f);
            add(p + "dwconv.bias", {k_c}, 0.1f);
            add(p + "norm.weight", {k_c}, 0.5f);
            add(p + "norm.bias", {k_c}, 0.1f);
            add(p + "pwconv1.weight", {k_c, k_c}, 0.3f);
            add(p + "pwconv1.bias", {k_c}, 0.1f);
        }
        add(s + "spatial_features_proj.weight", {k_c, k_c, 1, 1}, 0.3f);
        add(s + "spatial_features_proj.bias", {k_c}, 0.1f);
        add(s + "query_features_block.norm_in.weight", {k_c}, 0.5f);
        add(s + "query_features_block.norm_in.bias", {k_c}, 0.1f);
        add(s + "query_features_block.layers.0.weight", {k_hidden, k_c}, 0.3f);
        add(s + "query_features_block.layers.0.bias", {k_hidden}, 0.1f);
        add(s + "query_features_block.layers.2.weight", {k_c, k_hidden}, 0.3f);
        add(s + "query_features_block.layers.2.bias", {k_c}, 0.1f);
        add(s + "query_features_proj.weight", {k_c, k_c}, 0.3f);
        add(s + "query_features_proj.bias", {k_c}, 0.1f);
        add(s + "bias", {1}, 0.5f);
        for (const auto & t : sch_.tensors) {
            views_[t.name] = tensor_view{data_[t.name].data(), t.shape};
        }
    }
    const tensor_view & get(const std::string & name) const override { return views_.at(name); }
    const schema &      variant() const override { return sch_; }
    const std::string & layout() const override { return layout_; }
    int                 num_classes() const override { return 1; }
    const std::vector<std::string> & labels() const override { return labels_; }
    const std::string &              dir() const override { return layout_; }
    const std::map<std::string, std::string> & metadata() const override { return meta_; }
    bool                                       synthetic() const override { return true; }

    const std::vector<float> & w(const std::string & name) const { return data_.at("segmentation_head." + name); }

  private:
    schema                                    sch_;
    std::map<std::string, std::vector<float>> data_;
    std::map<std::string, tensor_view>        views_;
    std::string                               layout_ = "upstream";
    std::vector<std::string>                  labels_ = {"x"};
    std::map<std::string, std::string>        meta_;
};

using vec = std::vector<double>;

// LayerNorm over the last dim C of rows x C values.
vec ref_ln(const vec & x, const std::vector<float> & w, const std::vector<float> & b, double eps) {
    vec out(x.size());
    for (size_t r = 0; r < x.size() / w.size(); ++r) {
        const size_t C = w.size();
        double       m = 0, v = 0;
        for (size_t c = 0; c < C; ++c) m += x[r * C + c];
        m /= C;
        for (size_t c = 0; c < C; ++c) v += (x[r * C + c] - m) * (x[r * C + c] - m);
        v /= C;
        for (size_t c = 0; c < C; ++c) out[r * C + c] = (x[r * C + c] - m) / std::sqrt(v + eps) * w[c] + b[c];
    }
    return out;
}
// torch Linear: x [rows, in] @ W[out, in]^T + b
vec ref_linear(const vec & x, const std::vector<float> & W, const std::vector<float> & b, size_t in) {
    const size_t out = b.size(), rows = x.size() / in;
    vec          y(rows * out);
    for (size_t r = 0; r < rows; ++r)
        for (size_t o = 0; o < out; ++o) {
            double s = b[o];
            for (size_t i = 0; i < in; ++i) s += x[r * in + i] * W[o * in + i];
            y[r * out + o] = s;
        }
    return y;
}
vec ref_gelu(vec x) {
    for (double & v : x) v = 0.5 * v * (1 + std::erf(v / std::sqrt(2.0)));
    return x;
}

struct reference {
    vec up, blocks_last, proj, q, masks;  // channels-last spatial, q [Q, C], masks [Q, side^2]
};

reference ref_head(const fake_checkpoint & ck, const std::vector<float> & mem, const std::vector<float> & hs) {
    reference r;
    const int S = k_side;
    // upsample: torch bilinear align_corners=False, size (S, S) from (grid, grid)
    r.up.resize((size_t)S * S * k_c);
    auto src = [](int o) {
        double v = (o + 0.5) * k_grid / (double)k_side - 0.5;
        v        = v < 0 ? 0 : v;
        int i0 = (int)std::floor(v), i1 = std::min(i0 + 1, k_grid - 1);
        return std::make_tuple(i0, i1, v - i0);
    };
    for (int oy = 0; oy < S; ++oy)
        for (int ox = 0; ox < S; ++ox) {
            auto [y0, y1, ly] = src(oy);
            auto [x0, x1, lx] = src(ox);
            for (int c = 0; c < k_c; ++c) {
                auto at = [&](int y, int x) { return (double)mem[((size_t)y * k_grid + x) * k_c + c]; };
                r.up[((size_t)oy * S + ox) * k_c + c] =
                    (1 - ly) * ((1 - lx) * at(y0, x0) + lx * at(y0, x1)) + ly * ((1 - lx) * at(y1, x0) + lx * at(y1, x1));
            }
        }
    vec x = r.up;
    for (int b = 0; b < k_blocks; ++b) {
        const std::string p = "blocks." + std::to_string(b) + ".";
        const auto &      dw = ck.w(p + "dwconv.weight");
        vec               y((size_t)S * S * k_c);
        for (int c = 0; c < k_c; ++c)
            for (int yy = 0; yy < S; ++yy)
                for (int xx = 0; xx < S; ++xx) {
                    double s = ck.w(p + "dwconv.bias")[c];
                    for (int ky = 0; ky < 3; ++ky)
                        for (int kx = 0; kx < 3; ++kx) {
                            int sy = yy + ky - 1, sx = xx + kx - 1;
                            if (sy >= 0 && sy < S && sx >= 0 && sx < S) s += dw[c * 9 + ky * 3 + kx] * x[((size_t)sy * S + sx) * k_c + c];
                        }
                    y[((size_t)yy * S + xx) * k_c + c] = s;
                }
        y = ref_gelu(ref_linear(ref_ln(y, ck.w(p + "norm.weight"), ck.w(p + "norm.bias"), 1e-6), ck.w(p + "pwconv1.weight"),
                                ck.w(p + "pwconv1.bias"), k_c));
        for (size_t i = 0; i < x.size(); ++i) x[i] += y[i];
    }
    r.blocks_last = x;
    r.proj        = ref_linear(x, ck.w("spatial_features_proj.weight"), ck.w("spatial_features_proj.bias"), k_c);
    vec h(hs.begin(), hs.end());
    vec m = ref_gelu(ref_linear(ref_ln(h, ck.w("query_features_block.norm_in.weight"), ck.w("query_features_block.norm_in.bias"), 1e-5),
                                ck.w("query_features_block.layers.0.weight"), ck.w("query_features_block.layers.0.bias"), k_c));
    m   = ref_linear(m, ck.w("query_features_block.layers.2.weight"), ck.w("query_features_block.layers.2.bias"), k_hidden);
    for (size_t i = 0; i < h.size(); ++i) h[i] += m[i];
    r.q = ref_linear(h, ck.w("query_features_proj.weight"), ck.w("query_features_proj.bias"), k_c);
    r.masks.resize((size_t)k_q * S * S);
    for (int q = 0; q < k_q; ++q)
        for (int p = 0; p < S * S; ++p) {
            double s = ck.w("bias")[0];
            for (int c = 0; c < k_c; ++c) s += r.q[(size_t)q * k_c + c] * r.proj[(size_t)p * k_c + c];
            r.masks[(size_t)q * S * S + p] = s;
        }
    return r;
}

double max_abs(const std::vector<float> & a, const vec & b) {
    EXPECT_EQ(a.size(), b.size());
    double m = 0;
    for (size_t i = 0; i < a.size() && i < b.size(); ++i) {
        if (!std::isfinite(a[i])) return INFINITY;
        m = std::max(m, std::fabs(a[i] - b[i]));
    }
    return m;
}

std::vector<float> rndv(size_t n, uint32_t seed) {
    std::mt19937                    g(seed);
    std::normal_distribution<float> d(0.0f, 1.0f);
    std::vector<float>              v(n);
    for (float & x : v) x = d(g);
    return v;
}

tt_dims fake_dims() {
    tt_dims d;
    d.grid    = k_grid;
    d.d_model = k_c;
    return d;
}

}  // namespace

TEST(TtMaskHead, MatchesTheDirectImplementationStageByStage) {
    fake_checkpoint ck;
    auto            ops = tt_ops_host_create("fp32", 1);
    tt_mask_head head(*ops, ck, fake_dims(), k_side, k_blocks, k_q, tt_math{}, false);
    ASSERT_EQ(head.mask_side(), k_side);
    auto mem = rndv((size_t)k_grid * k_grid * k_c, 1), hs = rndv((size_t)k_q * k_c, 2);
    std::map<std::string, tt_tensor> taps;
    head.build(ops->upload(mem.data(), {1, k_grid * k_grid, k_c}, TT_DTYPE_FP32), ops->upload(hs.data(), {1, k_q, k_c}, TT_DTYPE_FP32),
               taps);
    const reference r   = ref_head(ck, mem, hs);
    auto            tap = [&](const std::string & n) {
        std::vector<float> v(tt_numel(taps.at(n)->shape));
        ops->read(taps.at(n), v.data());
        return v;
    };
    EXPECT_LE(max_abs(tap("seg.spatial_upsampled"), r.up), 1e-5);
    EXPECT_LE(max_abs(tap("seg.block_out." + std::to_string(k_blocks - 1)), r.blocks_last), 1e-5);
    EXPECT_LE(max_abs(tap("seg.spatial_proj"), r.proj), 1e-5);
    EXPECT_LE(max_abs(tap("seg.query_features"), r.q), 1e-5);

    // rows in any order, with a repeat, 35 of them (two 32-row tiles)
    std::vector<int> rows;
    for (int i = 0; i < 34; ++i) rows.push_back((i * 11) % k_q);
    rows.push_back(rows[3]);
    std::vector<float> got(rows.size() * k_side * k_side);
    head.masks(rows, got.data());
    vec want;
    for (int q : rows) want.insert(want.end(), r.masks.begin() + (size_t)q * k_side * k_side, r.masks.begin() + (size_t)(q + 1) * k_side * k_side);
    EXPECT_LE(max_abs(got, want), 1e-4);

    std::vector<float> none;
    EXPECT_NO_THROW(head.masks({}, none.data()));
    EXPECT_THROW(head.masks({k_q}, got.data()), error);
}
