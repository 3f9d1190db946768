// The ttnn implementation of the TT op vocabulary: one ttnn call per op, written against the tt-metal
// headers listed in TTNN_CALLS.md (pinned revision v0.78.0-dev20260820-25, commit 8b98410e730).
// NOT COMPILED AND NOT RUN HERE: there is no tt-metal tree or card on the build machines. Every signature
// below was read from headers (TTNN_CALLS.md says which, at which commit) or from the Python port's usage.
//
// Layout rules: device tensors are bf16 TILE (weights, constants, activations), except the fp32 input
// (uploaded TILE so one copy_host_to_device_tensor replaces it per request) and the tensors the sampling
// core and the row gather need ROW_MAJOR (converted inside those two ops, named in TTNN_CALLS.md).
#include "engines/tt/tt-ops-ttnn.h"

#include "engines/engine.h"

#include <ttnn/device.hpp>
#include <ttnn/operations/conv/conv2d/conv2d.hpp>
#include <ttnn/operations/core/core.hpp>
#include <ttnn/operations/data_movement/concat/concat.hpp>
#include <ttnn/operations/data_movement/permute/permute.hpp>
#include <ttnn/operations/data_movement/reshape_view/reshape.hpp>
#include <ttnn/operations/data_movement/slice/slice.hpp>
#include <ttnn/operations/eltwise/binary/binary.hpp>
#include <ttnn/operations/eltwise/ternary/where/where.hpp>
#include <ttnn/operations/eltwise/unary/unary.hpp>
#include <ttnn/operations/embedding/embedding.hpp>
#include <ttnn/operations/experimental/multi_scale_deformable_attn/multi_scale_deformable_attn.hpp>
#include <ttnn/operations/experimental/transformer/dit_minimal_matmul_addcmul_fused/dit_minimal_matmul_addcmul_fused.hpp>
#include <ttnn/operations/matmul/matmul.hpp>
#include <ttnn/operations/normalization/layernorm/layernorm.hpp>
#include <ttnn/operations/normalization/softmax/softmax.hpp>
#include <ttnn/operations/reduction/generic/generic_reductions.hpp>
#include <ttnn/operations/reduction/topk/topk.hpp>
#include <ttnn/operations/trace.hpp>
#include <ttnn/operations/transformer/concatenate_heads/concatenate_heads.hpp>
#include <ttnn/operations/transformer/sdpa/sdpa.hpp>
#include <ttnn/operations/transformer/split_query_key_value_and_split_heads/split_query_key_value_and_split_heads.hpp>
#include <ttnn/tensor/tensor.hpp>

#include <cstdio>
#include <map>
#include <optional>

namespace rfdetr {
namespace tt {

namespace {

constexpr size_t k_l1_small_size     = 32768;
constexpr size_t k_trace_region_size = 90'000'000;

struct ttnn_tensor : tt_tensor_base {
    ttnn::Tensor                dev;
    std::optional<ttnn::Tensor> host;      // conv weights: ttnn::conv2d prepares them from the host copy
    std::optional<ttnn::Tensor> prepared;  // ... and returns the device-layout weights it then reuses
};

std::shared_ptr<ttnn_tensor> as_tt(const tt_tensor & t) {
    auto p = std::dynamic_pointer_cast<ttnn_tensor>(t);
    if (!p) {
        throw error("tt_ops_ttnn: tensor is not a ttnn tensor (null or from another implementation)");
    }
    return p;
}

ttnn::Shape to_shape(const tt_shape & s) {
    ttnn::SmallVector<uint32_t> d;
    for (int64_t v : s) {
        d.push_back((uint32_t)v);
    }
    return ttnn::Shape(d);
}

tt_shape from_shape(const ttnn::Shape & s) {
    tt_shape out;
    for (size_t i = 0; i < s.rank(); ++i) {
        out.push_back((int64_t)s[i]);
    }
    return out;
}

tt_tensor wrap(ttnn::Tensor t) {
    auto w   = std::make_shared<ttnn_tensor>();
    w->shape = from_shape(t.logical_shape());
    w->dev   = std::move(t);
    return w;
}

std::optional<ttnn::Tensor> opt(const tt_tensor & t) {
    if (!t) {
        return std::nullopt;
    }
    return as_tt(t)->dev;
}

class tt_ops_ttnn : public tt_ops {
  public:
    explicit tt_ops_ttnn(int device_id) : device_id_(device_id) {
        device_ = ttnn::open_mesh_device(device_id, k_l1_small_size, k_trace_region_size);
        device_->enable_program_cache();
        // HiFi4 with fp32 accumulation everywhere (the port's decoder setting; its backbone used HiFi2
        // without fp32 accumulation for speed, a per-op tuning this vocabulary does not carry yet).
        compute_ = ttnn::WormholeComputeKernelConfig{.math_fidelity = MathFidelity::HiFi4,
                                                     .math_approx_mode = false,
                                                     .fp32_dest_acc_en = true,
                                                     .packer_l1_acc = true};
    }
    ~tt_ops_ttnn() override { close(); }

    std::string describe() const override {
        return "Tenstorrent device " + std::to_string(device_id_) + " (ttnn, bf16, one command queue)";
    }

    tt_tensor upload(const float * data, const tt_shape & shape, tt_dtype dtype) override {
        std::vector<float> v(data, data + tt_numel(shape));
        auto               dt = dtype == TT_DTYPE_FP32 ? ttnn::DataType::FLOAT32 : ttnn::DataType::BFLOAT16;
        if (shape.size() == 4) {  // conv weights [O,C,k,k]: kept on host, conv2d prepares them on first use
            auto w   = std::make_shared<ttnn_tensor>();
            w->shape = shape;
            w->host  = ttnn::Tensor::from_vector(std::move(v), spec(shape, ttnn::DataType::FLOAT32, ttnn::ROW_MAJOR_LAYOUT));
            return w;
        }
        return wrap(ttnn::Tensor::from_vector(std::move(v), spec(shape, dt, ttnn::TILE_LAYOUT), device_.get()));
    }

    void write(const tt_tensor & dst, const float * data) override {
        auto               d = as_tt(dst);
        std::vector<float> v(data, data + tt_numel(d->shape));
        auto host = ttnn::Tensor::from_vector(std::move(v), d->dev.tensor_spec());
        ttnn::copy_host_to_device_tensor(host, d->dev, ttnn::QueueId(0));
    }

    void read(const tt_tensor & src, float * out) override {
        auto v = ttnn::from_device(as_tt(src)->dev).to_vector<float>();
        std::copy(v.begin(), v.end(), out);
    }

    tt_tensor linear(const tt_tensor & x, const tt_tensor & w, const tt_tensor & b, tt_act act) override {
        std::optional<std::string> a;
        if (act == TT_ACT_RELU) {
            a = "relu";
        }
        return wrap(ttnn::linear(as_tt(x)->dev, as_tt(w)->dev, opt(b), false, false, std::nullopt, std::nullopt, std::nullopt, a,
                                 compute_));
    }

    tt_tensor linear_addcmul(const tt_tensor & x, const tt_tensor & w, const tt_tensor & b, const tt_tensor & residual,
                             const tt_tensor & scale) override {
        if (!scale) {
            throw error("tt_ops_ttnn::linear_addcmul: the fused kernel needs an explicit scale tensor (ones for none)");
        }
        return wrap(ttnn::experimental::dit_minimal_matmul_addcmul_fused(as_tt(x)->dev, as_tt(w)->dev, 1.0f, as_tt(residual)->dev,
                                                                          as_tt(scale)->dev, opt(b), std::nullopt, std::nullopt,
                                                                          std::nullopt, compute_));
    }

    tt_tensor matmul(const tt_tensor & a, const tt_tensor & b) override {
        return wrap(ttnn::matmul(as_tt(a)->dev, as_tt(b)->dev, false, false, std::nullopt, std::nullopt, std::nullopt, std::nullopt,
                                 compute_));
    }

    std::array<tt_tensor, 3> split_heads(const tt_tensor & qkv, int heads) override {
        auto [q, k, v] = ttnn::transformer::split_query_key_value_and_split_heads(as_tt(qkv)->dev, std::nullopt, (uint32_t)heads,
                                                                                   std::nullopt, false, std::nullopt);
        return {wrap(q), wrap(k), wrap(v)};
    }

    tt_tensor sdpa(const tt_tensor & q, const tt_tensor & k, const tt_tensor & v, float scale) override {
        return wrap(ttnn::transformer::scaled_dot_product_attention(as_tt(q)->dev, as_tt(k)->dev, as_tt(v)->dev, std::nullopt,
                                                                    /*is_causal=*/false, scale, std::nullopt, std::nullopt,
                                                                    std::nullopt, compute_));
    }

    tt_tensor concat_heads(const tt_tensor & x) override { return wrap(ttnn::transformer::concatenate_heads(as_tt(x)->dev)); }

    tt_tensor layer_norm(const tt_tensor & x, const tt_tensor & w, const tt_tensor & b, float eps) override {
        return wrap(ttnn::layer_norm(as_tt(x)->dev, eps, as_tt(w)->dev, as_tt(b)->dev, std::nullopt, std::nullopt, std::nullopt,
                                     compute_));
    }

    tt_tensor gelu(const tt_tensor & x) override { return wrap(ttnn::gelu(as_tt(x)->dev, /*fast_and_approximate_mode=*/false)); }
    tt_tensor silu(const tt_tensor & x) override { return wrap(ttnn::silu(as_tt(x)->dev)); }
    tt_tensor relu(const tt_tensor & x) override { return wrap(ttnn::relu(as_tt(x)->dev)); }
    tt_tensor exp(const tt_tensor & x) override { return wrap(ttnn::exp(as_tt(x)->dev)); }
    tt_tensor sin(const tt_tensor & x) override { return wrap(ttnn::sin(as_tt(x)->dev)); }
    tt_tensor cos(const tt_tensor & x) override { return wrap(ttnn::cos(as_tt(x)->dev)); }
    tt_tensor softmax(const tt_tensor & x) override { return wrap(ttnn::softmax(as_tt(x)->dev, -1)); }
    tt_tensor max(const tt_tensor & x) override { return wrap(ttnn::max(as_tt(x)->dev, -1, /*keepdim=*/false)); }

    tt_tensor add(const tt_tensor & a, const tt_tensor & b) override { return wrap(ttnn::add(as_tt(a)->dev, as_tt(b)->dev)); }
    tt_tensor multiply(const tt_tensor & a, const tt_tensor & b) override {
        return wrap(ttnn::multiply(as_tt(a)->dev, as_tt(b)->dev));
    }
    tt_tensor where(const tt_tensor & m, const tt_tensor & a, const tt_tensor & b) override {
        return wrap(ttnn::where(as_tt(m)->dev, as_tt(a)->dev, as_tt(b)->dev));
    }

    tt_tensor conv2d(const tt_tensor & x_, const tt_tensor & w_, int kernel, int pad) override {
        auto x = as_tt(x_);
        auto w = as_tt(w_);
        if (!w->host) {
            throw error("tt_ops_ttnn::conv2d: the weight was not uploaded as a 4-D conv kernel");
        }
        uint32_t H = (uint32_t)x->shape[1], W = (uint32_t)x->shape[2], C = (uint32_t)x->shape[3], O = (uint32_t)w->shape[0];
        // First call (the eager warm run, outside any capture) prepares the weights; later calls reuse them.
        const ttnn::Tensor & weight = w->prepared ? *w->prepared : *w->host;
        auto res = ttnn::conv2d(x->dev, weight, device_.get(), C, O, 1, H, W, {(uint32_t)kernel, (uint32_t)kernel}, {1, 1},
                                std::array<uint32_t, 2>{(uint32_t)pad, (uint32_t)pad}, {1, 1}, 1, std::nullopt, std::nullopt,
                                std::nullopt, compute_, std::nullopt, std::nullopt, /*return_output_dim=*/false,
                                /*return_weights_and_bias=*/true);
        auto & out = std::get<std::tuple<ttnn::Tensor, std::tuple<ttnn::Tensor, std::optional<ttnn::Tensor>>>>(res);
        if (!w->prepared) {
            w->prepared = std::get<0>(std::get<1>(out));
        }
        return wrap(ttnn::reshape(std::get<0>(out), to_shape({1, H, W, O})));  // conv2d returns [1,1,H*W,O]
    }

    tt_tensor topk_indices(const tt_tensor & x, int k) override {
        // ttnn.topk ranks bf16 input and returns uint16 indices; the row gather wants uint32 ROW_MAJOR.
        auto r = ttnn::topk(as_tt(x)->dev, (uint32_t)k, -1, /*largest=*/true, /*sorted=*/true);
        return wrap(ttnn::to_layout(ttnn::typecast(r.at(1), ttnn::DataType::UINT32), ttnn::ROW_MAJOR_LAYOUT));
    }

    tt_tensor gather_rows(const tt_tensor & table, const tt_tensor & idx) override {
        return wrap(ttnn::embedding(as_tt(idx)->dev, as_tt(table)->dev, std::nullopt, ttnn::TILE_LAYOUT));
    }

    tt_tensor deformable_attn(const tt_tensor & value, const tt_tensor & grid, const tt_tensor & attn) override {
        auto rm  = [](const tt_tensor & t) { return ttnn::to_layout(as_tt(t)->dev, ttnn::ROW_MAJOR_LAYOUT); };
        auto out = ttnn::experimental::multi_scale_deformable_attn(rm(value), rm(grid), rm(attn), std::nullopt, /*align_corners=*/false);
        return wrap(ttnn::to_layout(out, ttnn::TILE_LAYOUT));
    }

    tt_tensor reshape(const tt_tensor & x, const tt_shape & shape) override {
        return wrap(ttnn::reshape(as_tt(x)->dev, to_shape(shape)));
    }
    tt_tensor permute(const tt_tensor & x, const std::vector<int> & perm) override {
        ttnn::SmallVector<int64_t> p(perm.begin(), perm.end());
        return wrap(ttnn::permute(as_tt(x)->dev, p));
    }
    tt_tensor slice_last(const tt_tensor & x_, int64_t begin, int64_t end) override {
        auto                        x = as_tt(x_);
        ttnn::SmallVector<uint32_t> b(x->shape.size(), 0), e, s(x->shape.size(), 1);
        for (int64_t d : x->shape) {
            e.push_back((uint32_t)d);
        }
        b.back() = (uint32_t)begin;
        e.back() = (uint32_t)end;
        return wrap(ttnn::slice(x->dev, b, e, s));
    }
    tt_tensor concat_last(const std::vector<tt_tensor> & xs) override {
        std::vector<ttnn::Tensor> ts;
        for (const auto & t : xs) {
            ts.push_back(as_tt(t)->dev);
        }
        return wrap(ttnn::concat(ts, -1));
    }

    void begin_trace_capture() override {
        trace_ = ttnn::operations::trace::begin_trace_capture(device_.get(), ttnn::QueueId(0));
    }
    void end_trace_capture() override {
        ttnn::operations::trace::end_trace_capture(device_.get(), *trace_, ttnn::QueueId(0));
    }
    void execute_trace() override {
        ttnn::operations::trace::execute_trace(device_.get(), *trace_, ttnn::QueueId(0), /*blocking=*/false);
    }
    void release_trace() override {
        if (trace_) {
            ttnn::operations::trace::release_trace(device_.get(), *trace_);
            trace_.reset();
        }
    }
    void synchronize() override { ttnn::synchronize_device(device_.get()); }
    void close() override {
        if (device_) {
            release_trace();
            device_->close();
            device_.reset();
        }
    }

  private:
    static ttnn::TensorSpec spec(const tt_shape & shape, ttnn::DataType dt, ttnn::Layout layout) {
        return ttnn::TensorSpec(to_shape(shape), ttnn::TensorLayout(dt, ttnn::PageConfig(layout), ttnn::DRAM_MEMORY_CONFIG));
    }

    int                                   device_id_;
    std::shared_ptr<ttnn::MeshDevice>     device_;
    ttnn::DeviceComputeKernelConfig       compute_;
    std::optional<ttnn::MeshTraceId>      trace_;
};

}  // namespace

std::unique_ptr<tt_ops> tt_ops_ttnn_open(int device_id) {
    try {
        return std::make_unique<tt_ops_ttnn>(device_id);
    } catch (const std::exception & e) {
        throw error("tt engine: could not open Tenstorrent device " + std::to_string(device_id) + ": " + e.what() +
                    ". Check that the card is visible (tt-smi), that TT_METAL_VISIBLE_DEVICES includes it, and that no "
                    "other process holds it");
    }
}

}  // namespace tt
}  // namespace rfdetr
