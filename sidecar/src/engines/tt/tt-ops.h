// The vocabulary the RF-DETR-base device graph is written in: each operation mirrors one ttnn call
// (TTNN_CALLS.md names the call). Two implementations: `host` (plain C++, fp32 or bf16-rounded, runs
// everywhere; engine `tt-host`) and `ttnn` (one ttnn call per op, built with RFDETR_WITH_TTNN=ON).
// The graph (tt-graph.cpp) only ever talks to this interface, so running it on the host proves the
// decomposition the device executes.
//
// Conventions: shapes are row-major, last dim fastest. Linear weights are stored [in, out] (the
// transposed torch layout, as ttnn.linear takes them). Broadcasting of binary ops is numpy-style.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace rfdetr {
namespace tt {

using tt_shape = std::vector<int64_t>;

int64_t     tt_numel(const tt_shape & shape);
std::string tt_shape_str(const tt_shape & shape);

// Storage dtype of a device tensor. The host implementation rounds a tensor to bf16 when it is
// created with TT_DTYPE_BF16 and the ops run at bf16 precision; in fp32 precision nothing rounds.
enum tt_dtype {
    TT_DTYPE_BF16,
    TT_DTYPE_FP32,
};

// Matmul math fidelity (Tensix FPU multiplier 5b x 7b: SrcA = in1, the weights, is consumed 4 mantissa bits
// per phase; SrcB = in0, the activations, 6 bits per phase). LoFi: hi(A)·hi(B); HiFi2: A·hi(B);
// HiFi3: A·hi(B) + hi(A)·lo(B); HiFi4: A·B (full bf16 precision of both operands).
enum tt_fidelity {
    TT_FIDELITY_LOFI,
    TT_FIDELITY_HIFI2,
    TT_FIDELITY_HIFI3,
    TT_FIDELITY_HIFI4,
};

// Per-op numerics: what the device's compute kernel config and output dtype say. set_math() applies to the ops
// issued after it (the graph sets it per stage; the ttnn layer passes it as compute_kernel_config + dtype).
struct tt_math {
    tt_fidelity fidelity = TT_FIDELITY_HIFI4;
    bool        fp32_acc = true;   // fp32_dest_acc_en; false: partial sums rounded to bf16 every 16 products of K
    bool        out_fp32 = false;  // output dtype FLOAT32 instead of BFLOAT16
};

enum tt_act {
    TT_ACT_NONE,
    TT_ACT_RELU,
};

// A device tensor handle. Implementations derive from it; the graph only reads `shape`.
struct tt_tensor_base {
    virtual ~tt_tensor_base() = default;
    tt_shape shape;
};
using tt_tensor = std::shared_ptr<tt_tensor_base>;

class tt_ops {
  public:
    virtual ~tt_ops() = default;

    virtual std::string describe() const = 0;

    // The numerics of the ops issued from now on (matmul-type ops: fidelity and accumulation; every op that
    // creates a tensor: its dtype). Recorded with each op, so a trace replays them unchanged.
    virtual void set_math(const tt_math & m) = 0;

    // ---- host <-> device ------------------------------------------------------------------------
    // A tensor with the given contents (weights, constants, the persistent input buffer).
    virtual tt_tensor upload(const float * data, const tt_shape & shape, tt_dtype dtype) = 0;
    // Overwrites a tensor made by upload() in place (the per-request input copy the trace reads).
    virtual void write(const tt_tensor & dst, const float * data) = 0;
    // Reads a tensor back as f32 (tt_numel(shape) values).
    virtual void read(const tt_tensor & src, float * out) = 0;
    // Row indices [1, K] in the form gather_rows takes (UINT32 ROW_MAJOR on the device); outside a trace only.
    virtual tt_tensor upload_indices(const std::vector<int> & idx) = 0;

    // ---- matmuls ------------------------------------------------------------------------------
    // x[..., K] @ w[K, N] (+ b[N]) with an optional fused activation.
    virtual tt_tensor linear(const tt_tensor & x, const tt_tensor & w, const tt_tensor & b, tt_act act) = 0;
    // residual + (x @ w + b) * scale, residual/scale broadcast to the output (scale may be null = 1).
    virtual tt_tensor linear_addcmul(const tt_tensor & x, const tt_tensor & w, const tt_tensor & b,
                                     const tt_tensor & residual, const tt_tensor & scale) = 0;
    // a[M, K] @ b[K, N] (the 0/1 feature-shaping permutation).
    virtual tt_tensor matmul(const tt_tensor & a, const tt_tensor & b) = 0;

    // ---- attention ----------------------------------------------------------------------------
    // qkv [B, S, 3*H*D] (q | k | v, head-major inside each) -> q, k, v as [B, H, S, D].
    virtual std::array<tt_tensor, 3> split_heads(const tt_tensor & qkv, int heads) = 0;
    // softmax(q·kᵀ·scale)·v over [B, H, S, D], no mask.
    virtual tt_tensor sdpa(const tt_tensor & q, const tt_tensor & k, const tt_tensor & v, float scale) = 0;
    // [B, H, S, D] -> [B, S, H*D].
    virtual tt_tensor concat_heads(const tt_tensor & x) = 0;

    // ---- normalisation and activations ------------------------------------------------------------
    virtual tt_tensor layer_norm(const tt_tensor & x, const tt_tensor & w, const tt_tensor & b, float eps) = 0;
    virtual tt_tensor gelu(const tt_tensor & x) = 0;  // exact erf
    virtual tt_tensor silu(const tt_tensor & x) = 0;
    virtual tt_tensor relu(const tt_tensor & x) = 0;
    virtual tt_tensor exp(const tt_tensor & x) = 0;
    virtual tt_tensor sin(const tt_tensor & x) = 0;
    virtual tt_tensor cos(const tt_tensor & x) = 0;
    virtual tt_tensor softmax(const tt_tensor & x) = 0;  // over the last dim
    virtual tt_tensor max(const tt_tensor & x) = 0;      // over the last dim, which is dropped

    // ---- elementwise (broadcasting) -----------------------------------------------------------------
    virtual tt_tensor add(const tt_tensor & a, const tt_tensor & b) = 0;
    virtual tt_tensor multiply(const tt_tensor & a, const tt_tensor & b) = 0;
    // mask != 0 ? a : b
    virtual tt_tensor where(const tt_tensor & mask, const tt_tensor & a, const tt_tensor & b) = 0;

    // ---- convolution ----------------------------------------------------------------------------
    // x [1, H, W, C] channels-last, w [O, C, k, k] (torch layout), stride 1, zero pad, no bias -> [1, H, W, O].
    virtual tt_tensor conv2d(const tt_tensor & x, const tt_tensor & w, int kernel, int pad) = 0;

    // ---- mask head (RF-DETR Seg) ------------------------------------------------------------------
    // x [1, H, W, C] channels-last -> [1, H*scale, W*scale, C], bilinear with align_corners=False (torch's
    // half-pixel source index src = (dst + 0.5) / scale - 0.5, clamped at 0 below and at the last row/column).
    virtual tt_tensor upsample_bilinear(const tt_tensor & x, int scale) = 0;
    // Depthwise convolution (groups = C): x [1, H, W, C], w [C, 1, k, k] (torch layout), stride 1, zero pad,
    // no bias -> [1, H, W, C].
    virtual tt_tensor conv2d_depthwise(const tt_tensor & x, const tt_tensor & w, int kernel, int pad) = 0;

    // ---- selection ------------------------------------------------------------------------------
    // Indices of the k largest values along the last dim of x [1, N], descending (ties: lower index
    // first). The result holds indices as values. A bf16 x is ranked by ttnn::topk (bf16 only); an fp32 x is
    // ranked exactly in fp32 (on the device: rank = count of larger scores, by pairwise comparison).
    virtual tt_tensor topk_indices(const tt_tensor & x, int k) = 0;
    // table [N, C] rows gathered by idx [1, K] -> [1, K, C].
    virtual tt_tensor gather_rows(const tt_tensor & table, const tt_tensor & idx) = 0;
    // Single-level multi-scale deformable attention sampling core:
    // value [M, H, W, D] (per head, channels-last), grid [M, Q*P, 1, 2] in [-1, 1] (x, y),
    // attn [M, Q, P] -> [M, Q, D] = Σ_p attn · bilinear(value, grid) (align_corners=False, zero padding).
    virtual tt_tensor deformable_attn(const tt_tensor & value, const tt_tensor & grid, const tt_tensor & attn) = 0;

    // ---- data movement ----------------------------------------------------------------------------
    virtual tt_tensor reshape(const tt_tensor & x, const tt_shape & shape) = 0;
    virtual tt_tensor permute(const tt_tensor & x, const std::vector<int> & perm) = 0;
    // x[..., begin:end] along the last dim.
    virtual tt_tensor slice_last(const tt_tensor & x, int64_t begin, int64_t end) = 0;
    // Concatenation along the last dim.
    virtual tt_tensor concat_last(const std::vector<tt_tensor> & xs) = 0;

    // ---- trace ---------------------------------------------------------------------------------
    // Ops issued between begin and end are recorded; execute_trace replays them into the same output
    // tensors, reading whatever the inputs hold now.
    virtual void begin_trace_capture() = 0;
    virtual void end_trace_capture()   = 0;
    virtual void execute_trace()       = 0;
    virtual void release_trace()       = 0;
    virtual void synchronize()         = 0;
    // Closes the device; idempotent. Tensors must not be used afterwards.
    virtual void close() = 0;
};

// The host implementation. precision: "fp32" (no rounding; set_math is ignored) or "bf16" (the device's
// numerics as set_math describes them: bf16 tensors rounded when created, fp32 inputs of a matmul read as
// tf32, the fidelity's operand truncation, bf16 partial sums without fp32 accumulation). threads: OpenBLAS
// threads (0 = leave).
std::unique_ptr<tt_ops> tt_ops_host_create(const std::string & precision, int threads);

// bf16 round-to-nearest-even of an f32 (NaN stays NaN).
float tt_round_bf16(float x);
// Keeps the top `bits` mantissa bits of an f32 (truncation toward zero, as the FPU's fidelity phases read them).
float tt_truncate_mantissa(float x, int bits);

}  // namespace tt
}  // namespace rfdetr
