// The host implementation of the device-graph vocabulary (tt-ops.h): plain C++ with OpenBLAS sgemm for the
// matmuls. At precision bf16 it models the device's numerics op by op, as set_math() describes them: every
// tensor the device keeps in bf16 is rounded when it is created (weights at upload, activations at each op's
// output; an op with out_fp32 keeps fp32), a matmul reads fp32 operands as tf32 (the 19-bit source registers;
// in1 in SrcA, whose fidelity phases consume 2 x 4 mantissa bits, keeps 8),
// truncates its operands as the math fidelity's phases do, and without fp32 accumulation rounds its partial
// sums to bf16 after every 16 products along K (the FPU's 16-deep step into a Float16_b destination).
// The trace is emulated faithfully: ops issued during capture are recorded as closures over their input and
// output buffers, and a replay recomputes them in place, reading whatever the inputs hold now.
#include "engines/tt/openblas-core.h"
#include "engines/tt/tt-ops.h"
#include "engines/tt/tt-ops-host-operands.h"
#include "engines/tt/tt-ops-host-spatial.h"

#include "engines/engine.h"

#include <cblas.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <numeric>

namespace rfdetr {
namespace tt {

int64_t tt_numel(const tt_shape & shape) {
    int64_t n = 1;
    for (int64_t d : shape) {
        n *= d;
    }
    return n;
}

std::string tt_shape_str(const tt_shape & shape) {
    std::string s = "[";
    for (size_t i = 0; i < shape.size(); ++i) {
        s += (i ? "," : "") + std::to_string(shape[i]);
    }
    return s + "]";
}

float tt_truncate_mantissa(float x, int bits) {
    uint32_t u;
    std::memcpy(&u, &x, 4);
    if ((u & 0x7f800000u) != 0x7f800000u && bits < 23) {
        u &= ~((1u << (23 - bits)) - 1u);
    }
    float r;
    std::memcpy(&r, &u, 4);
    return r;
}

float tt_round_bf16(float x) {
    uint32_t u;
    std::memcpy(&u, &x, 4);
    if ((u & 0x7f800000u) == 0x7f800000u) {  // inf / NaN: truncate, keep NaN quiet
        if (u & 0x007fffffu) {
            u |= 0x00400000u;
        }
        u &= 0xffff0000u;
    } else {
        u += 0x7fffu + ((u >> 16) & 1u);
        u &= 0xffff0000u;
    }
    float r;
    std::memcpy(&r, &u, 4);
    return r;
}

namespace {

constexpr int k_acc_depth = 16;  // products the FPU adds per step into the destination register

struct host_tensor : tt_tensor_base {
    std::shared_ptr<std::vector<float>> data;  // shared by reshapes (views)
    bool                                bf16 = false;
    float *       ptr() { return data->data(); }
    const float * ptr() const { return data->data(); }
};

using host_ptr = std::shared_ptr<host_tensor>;

host_ptr as_host(const tt_tensor & t, const char * op) {
    if (!t) {
        throw error(std::string("tt_ops_host::") + op + ": missing tensor argument (null); the graph passed an unset tensor");
    }
    auto h = std::dynamic_pointer_cast<host_tensor>(t);
    if (!h) {
        throw error(std::string("tt_ops_host::") + op + ": tensor is not a host tensor; tensors cannot cross implementations");
    }
    return h;
}

[[noreturn]] void shape_error(const char * op, const std::string & what) {
    throw error(std::string("tt_ops_host::") + op + ": " + what);
}

// Output shape of a numpy-style broadcast.
tt_shape broadcast_shape(const tt_shape & a, const tt_shape & b, const char * op) {
    size_t   r = std::max(a.size(), b.size());
    tt_shape out(r);
    for (size_t i = 0; i < r; ++i) {
        int64_t da = i < r - a.size() ? 1 : a[i - (r - a.size())];
        int64_t db = i < r - b.size() ? 1 : b[i - (r - b.size())];
        if (da != db && da != 1 && db != 1) {
            shape_error(op, "shapes " + tt_shape_str(a) + " and " + tt_shape_str(b) + " do not broadcast");
        }
        out[i] = std::max(da, db);
    }
    return out;
}

// Element strides of `s` seen through the broadcast shape `out` (0 on broadcast dims).
std::vector<int64_t> broadcast_strides(const tt_shape & s, const tt_shape & out) {
    std::vector<int64_t> st(out.size(), 0);
    int64_t              stride = 1;
    for (size_t i = 0; i < s.size(); ++i) {
        size_t si = s.size() - 1 - i;
        size_t oi = out.size() - 1 - i;
        st[oi]    = s[si] == 1 ? 0 : stride;
        stride *= s[si];
    }
    return st;
}

// Calls fn(out_index, offsets...) over every element of `out`, with the offsets of each input.
template <size_t N, typename F>
void for_each_broadcast(const tt_shape & out, const std::array<std::vector<int64_t>, N> & strides, F fn) {
    int64_t n = tt_numel(out);
    if (n == 0) {
        return;
    }
    size_t                 r = out.size();
    std::vector<int64_t>   idx(r, 0);
    std::array<int64_t, N> off{};
    for (int64_t i = 0; i < n; ++i) {
        fn(i, off);
        for (size_t d = r; d-- > 0;) {
            ++idx[d];
            for (size_t k = 0; k < N; ++k) {
                off[k] += strides[k][d];
            }
            if (idx[d] < out[d]) {
                break;
            }
            for (size_t k = 0; k < N; ++k) {
                off[k] -= strides[k][d] * out[d];
            }
            idx[d] = 0;
        }
    }
}

class tt_ops_host : public tt_ops {
  public:
    tt_ops_host(bool bf16, int threads) : bf16_(bf16) {
        if (threads > 0) {
            openblas_set_num_threads(threads);
        }
    }

    void set_math(const tt_math & m) override { math_ = m; }

    std::string describe() const override {
        return std::string("host (plain C++, OpenBLAS ") + openblas_core() + " kernels, " + (bf16_ ? "bf16-rounded" : "fp32") +
               ")";
    }

    tt_tensor upload(const float * data, const tt_shape & shape, tt_dtype dtype) override {
        check_open("upload");
        if (capturing_) {
            shape_error("upload", "cannot allocate while a trace is being captured; upload before begin_trace_capture");
        }
        auto t = make(shape, dtype == TT_DTYPE_BF16);
        std::memcpy(t->ptr(), data, sizeof(float) * tt_numel(shape));
        round(*t);
        return t;
    }

    void write(const tt_tensor & dst, const float * data) override {
        check_open("write");
        auto t = as_host(dst, "write");
        std::memcpy(t->ptr(), data, sizeof(float) * tt_numel(t->shape));
        round(*t);
    }

    void read(const tt_tensor & src, float * out) override {
        check_open("read");
        auto t = as_host(src, "read");
        std::memcpy(out, t->ptr(), sizeof(float) * tt_numel(t->shape));
    }

    tt_tensor upload_indices(const std::vector<int> & idx) override {
        std::vector<float> v(idx.begin(), idx.end());
        return upload(v.data(), {1, (int64_t)idx.size()}, TT_DTYPE_FP32);
    }

    tt_tensor linear(const tt_tensor & x_, const tt_tensor & w_, const tt_tensor & b_, tt_act act) override {
        auto x = as_host(x_, "linear");
        auto w = as_host(w_, "linear");
        auto b = b_ ? as_host(b_, "linear") : nullptr;
        check_linear(x, w, b, "linear");
        tt_shape shape = x->shape;
        shape.back()   = w->shape[1];
        auto out       = make(shape, out_bf16());
        tt_math m = math_;
        run([=] {
            gemm_bias(*x, *w, b.get(), *out, m);
            if (act == TT_ACT_RELU) {
                for (float & v : *out->data) {
                    v = v > 0.0f ? v : 0.0f;
                }
            }
            round(*out);
        });
        return out;
    }

    tt_tensor linear_addcmul(const tt_tensor & x_, const tt_tensor & w_, const tt_tensor & b_,
                             const tt_tensor & residual_, const tt_tensor & scale_) override {
        auto x   = as_host(x_, "linear_addcmul");
        auto w   = as_host(w_, "linear_addcmul");
        auto b   = b_ ? as_host(b_, "linear_addcmul") : nullptr;
        auto res = as_host(residual_, "linear_addcmul");
        auto sc  = scale_ ? as_host(scale_, "linear_addcmul") : nullptr;
        check_linear(x, w, b, "linear_addcmul");
        tt_shape shape = x->shape;
        shape.back()   = w->shape[1];
        if (broadcast_shape(shape, res->shape, "linear_addcmul") != shape ||
            (sc && broadcast_shape(shape, sc->shape, "linear_addcmul") != shape)) {
            shape_error("linear_addcmul", "residual " + tt_shape_str(res->shape) + " / scale must broadcast to the output " +
                                              tt_shape_str(shape));
        }
        auto out = make(shape, out_bf16());
        auto mm  = std::make_shared<host_tensor>();
        mm->shape = shape;
        mm->data  = std::make_shared<std::vector<float>>(tt_numel(shape));
        tt_math m = math_;
        run([=] {
            gemm_bias(*x, *w, b.get(), *mm, m);
            std::array<std::vector<int64_t>, 3> st = {broadcast_strides(shape, shape), broadcast_strides(res->shape, shape),
                                                      sc ? broadcast_strides(sc->shape, shape) : std::vector<int64_t>(shape.size(), 0)};
            const float * mp = mm->ptr();
            const float * r  = res->ptr();
            const float * s  = sc ? sc->ptr() : nullptr;
            float *       o  = out->ptr();
            for_each_broadcast<3>(shape, st, [&](int64_t i, const std::array<int64_t, 3> & off) {
                float v = s ? mp[off[0]] * s[off[2]] : mp[off[0]];
                o[i]    = r[off[1]] + v;
            });
            round(*out);
        });
        return out;
    }

    tt_tensor matmul(const tt_tensor & a_, const tt_tensor & b_) override {
        auto a = as_host(a_, "matmul");
        auto b = as_host(b_, "matmul");
        if (a->shape.size() != 2 || b->shape.size() != 2 || a->shape[1] != b->shape[0]) {
            shape_error("matmul", "expected a[M,K] @ b[K,N], got " + tt_shape_str(a->shape) + " @ " + tt_shape_str(b->shape));
        }
        auto out = make({a->shape[0], b->shape[1]}, out_bf16());
        tt_math m = math_;
        run([=] {
            int M = (int)a->shape[0], K = (int)a->shape[1], N = (int)b->shape[1];
            device_gemm(*a, a->ptr(), *b, b->ptr(), false, M, N, K, out->ptr(), m);
            round(*out);
        });
        return out;
    }

    std::array<tt_tensor, 3> split_heads(const tt_tensor & qkv_, int heads) override {
        auto qkv = as_host(qkv_, "split_heads");
        if (qkv->shape.size() != 3 || heads <= 0 || qkv->shape[2] % (3 * heads) != 0) {
            shape_error("split_heads", "expected [B,S,3*H*D] with H=" + std::to_string(heads) + ", got " + tt_shape_str(qkv->shape));
        }
        int64_t B = qkv->shape[0], S = qkv->shape[1], D = qkv->shape[2] / (3 * heads);
        std::array<tt_tensor, 3> outs;
        std::array<host_ptr, 3>  hs;
        for (int i = 0; i < 3; ++i) {
            hs[i]   = make({B, heads, S, D}, qkv->bf16);
            outs[i] = hs[i];
        }
        run([=] {
            const float * src = qkv->ptr();
            for (int64_t b = 0; b < B; ++b) {
                for (int64_t s = 0; s < S; ++s) {
                    const float * row = src + (b * S + s) * 3 * heads * D;
                    for (int part = 0; part < 3; ++part) {
                        for (int64_t h = 0; h < heads; ++h) {
                            std::memcpy(hs[part]->ptr() + ((b * heads + h) * S + s) * D, row + (part * heads + h) * D,
                                        sizeof(float) * D);
                        }
                    }
                }
            }
        });
        return outs;
    }

    tt_tensor sdpa(const tt_tensor & q_, const tt_tensor & k_, const tt_tensor & v_, float scale) override {
        auto q = as_host(q_, "sdpa");
        auto k = as_host(k_, "sdpa");
        auto v = as_host(v_, "sdpa");
        if (q->shape.size() != 4 || k->shape != v->shape || k->shape.size() != 4 || q->shape[0] != k->shape[0] ||
            q->shape[1] != k->shape[1] || q->shape[3] != k->shape[3]) {
            shape_error("sdpa", "expected q[B,H,Sq,D], k=v[B,H,Sk,D], got " + tt_shape_str(q->shape) + ", " +
                                    tt_shape_str(k->shape) + ", " + tt_shape_str(v->shape));
        }
        auto out     = make(q->shape, out_bf16());
        auto scores  = std::make_shared<std::vector<float>>(q->shape[2] * k->shape[2]);
        tt_math m = math_;
        run([=] {
            int64_t BH = q->shape[0] * q->shape[1];
            int     Sq = (int)q->shape[2], Sk = (int)k->shape[2], D = (int)q->shape[3];
            float * sc = scores->data();
            for (int64_t bh = 0; bh < BH; ++bh) {
                const float * qp = q->ptr() + bh * Sq * D;
                const float * kp = k->ptr() + bh * Sk * D;
                const float * vp = v->ptr() + bh * Sk * D;
                float *       op = out->ptr() + bh * Sq * D;
                device_gemm(*q, qp, *k, kp, true, Sq, Sk, D, sc, m);
                for (int i = 0; i < Sq; ++i) {
                    float * row = sc + (int64_t)i * Sk;
                    float   m   = -INFINITY;
                    for (int j = 0; j < Sk; ++j) {
                        row[j] *= scale;
                        m = std::max(m, row[j]);
                    }
                    float sum = 0.0f;
                    for (int j = 0; j < Sk; ++j) {
                        row[j] = std::exp(row[j] - m);
                        sum += row[j];
                    }
                    float inv = 1.0f / sum;
                    for (int j = 0; j < Sk; ++j) {
                        row[j] = bf16_ ? tt_round_bf16(row[j] * inv) : row[j] * inv;  // the kernel's P is bf16
                    }
                }
                host_tensor p_dtype;
                p_dtype.bf16 = true;
                device_gemm(p_dtype, sc, *v, vp, false, Sq, D, Sk, op, m);
            }
            round(*out);
        });
        return out;
    }

    tt_tensor concat_heads(const tt_tensor & x_) override {
        auto x = as_host(x_, "concat_heads");
        if (x->shape.size() != 4) {
            shape_error("concat_heads", "expected [B,H,S,D], got " + tt_shape_str(x->shape));
        }
        int64_t B = x->shape[0], H = x->shape[1], S = x->shape[2], D = x->shape[3];
        auto    out = make({B, S, H * D}, x->bf16);
        run([=] {
            for (int64_t b = 0; b < B; ++b) {
                for (int64_t h = 0; h < H; ++h) {
                    for (int64_t s = 0; s < S; ++s) {
                        std::memcpy(out->ptr() + (b * S + s) * H * D + h * D, x->ptr() + ((b * H + h) * S + s) * D,
                                    sizeof(float) * D);
                    }
                }
            }
        });
        return out;
    }

    tt_tensor layer_norm(const tt_tensor & x_, const tt_tensor & w_, const tt_tensor & b_, float eps) override {
        auto    x = as_host(x_, "layer_norm");
        auto    w = as_host(w_, "layer_norm");
        auto    b = as_host(b_, "layer_norm");
        int64_t C = x->shape.back();
        if (tt_numel(w->shape) != C || tt_numel(b->shape) != C) {
            shape_error("layer_norm", "weight/bias must have " + std::to_string(C) + " values, got " + tt_shape_str(w->shape) +
                                          " / " + tt_shape_str(b->shape));
        }
        auto out = make(x->shape, out_bf16());
        run([=] {
            int64_t rows = tt_numel(x->shape) / C;
            for (int64_t r = 0; r < rows; ++r) {
                const float * xi = x->ptr() + r * C;
                float *       o  = out->ptr() + r * C;
                float         mean = 0.0f;
                for (int64_t c = 0; c < C; ++c) {
                    mean += xi[c];
                }
                mean /= (float)C;
                float var = 0.0f;
                for (int64_t c = 0; c < C; ++c) {
                    float d = xi[c] - mean;
                    var += d * d;
                }
                var /= (float)C;
                float rstd = 1.0f / std::sqrt(var + eps);
                for (int64_t c = 0; c < C; ++c) {
                    o[c] = (xi[c] - mean) * rstd * w->ptr()[c] + b->ptr()[c];
                }
            }
            round(*out);
        });
        return out;
    }

    tt_tensor gelu(const tt_tensor & x) override {
        return unary(x, "gelu", [](float v) { return 0.5f * v * (1.0f + std::erf(v * 0.70710678118654752f)); });
    }
    tt_tensor silu(const tt_tensor & x) override {
        return unary(x, "silu", [](float v) { return v / (1.0f + std::exp(-v)); });
    }
    tt_tensor relu(const tt_tensor & x) override {
        return unary(x, "relu", [](float v) { return v > 0.0f ? v : 0.0f; });
    }
    tt_tensor exp(const tt_tensor & x) override {
        return unary(x, "exp", [](float v) { return std::exp(v); });
    }
    tt_tensor sin(const tt_tensor & x) override {
        return unary(x, "sin", [](float v) { return std::sin(v); });
    }
    tt_tensor cos(const tt_tensor & x) override {
        return unary(x, "cos", [](float v) { return std::cos(v); });
    }

    tt_tensor softmax(const tt_tensor & x_) override {
        auto x   = as_host(x_, "softmax");
        auto out = make(x->shape, out_bf16());
        run([=] {
            int64_t C = x->shape.back(), rows = tt_numel(x->shape) / C;
            for (int64_t r = 0; r < rows; ++r) {
                const float * xi = x->ptr() + r * C;
                float *       o  = out->ptr() + r * C;
                float         m  = -INFINITY;
                for (int64_t c = 0; c < C; ++c) {
                    m = std::max(m, xi[c]);
                }
                float sum = 0.0f;
                for (int64_t c = 0; c < C; ++c) {
                    o[c] = std::exp(xi[c] - m);
                    sum += o[c];
                }
                for (int64_t c = 0; c < C; ++c) {
                    o[c] /= sum;
                }
            }
            round(*out);
        });
        return out;
    }

    tt_tensor max(const tt_tensor & x_) override {
        auto     x     = as_host(x_, "max");
        tt_shape shape = x->shape;
        shape.pop_back();
        auto out = make(shape, out_bf16());
        run([=] {
            int64_t C = x->shape.back(), rows = tt_numel(x->shape) / C;
            for (int64_t r = 0; r < rows; ++r) {
                const float * xi = x->ptr() + r * C;
                out->ptr()[r]    = *std::max_element(xi, xi + C);
            }
            round(*out);
        });
        return out;
    }

    tt_tensor add(const tt_tensor & a, const tt_tensor & b) override {
        return binary(a, b, "add", [](float u, float v) { return u + v; });
    }
    tt_tensor multiply(const tt_tensor & a, const tt_tensor & b) override {
        return binary(a, b, "multiply", [](float u, float v) { return u * v; });
    }

    tt_tensor where(const tt_tensor & mask_, const tt_tensor & a_, const tt_tensor & b_) override {
        auto     m     = as_host(mask_, "where");
        auto     a     = as_host(a_, "where");
        auto     b     = as_host(b_, "where");
        tt_shape shape = broadcast_shape(broadcast_shape(m->shape, a->shape, "where"), b->shape, "where");
        auto     out   = make(shape, out_bf16());
        run([=] {
            std::array<std::vector<int64_t>, 3> st = {broadcast_strides(m->shape, shape), broadcast_strides(a->shape, shape),
                                                      broadcast_strides(b->shape, shape)};
            const float *mp = m->ptr(), *ap = a->ptr(), *bp = b->ptr();
            float *      o = out->ptr();
            for_each_broadcast<3>(shape, st, [&](int64_t i, const std::array<int64_t, 3> & off) {
                o[i] = mp[off[0]] != 0.0f ? ap[off[1]] : bp[off[2]];
            });
            round(*out);
        });
        return out;
    }

    tt_tensor conv2d(const tt_tensor & x_, const tt_tensor & w_, int kernel, int pad) override {
        auto x = as_host(x_, "conv2d");
        auto w = as_host(w_, "conv2d");
        if (x->shape.size() != 4 || x->shape[0] != 1 || w->shape.size() != 4 || w->shape[1] != x->shape[3] ||
            w->shape[2] != kernel || w->shape[3] != kernel) {
            shape_error("conv2d", "expected x[1,H,W,C] and w[O,C,k,k] with k=" + std::to_string(kernel) + ", got " +
                                      tt_shape_str(x->shape) + " and " + tt_shape_str(w->shape));
        }
        int64_t H = x->shape[1], W = x->shape[2], C = x->shape[3], O = w->shape[0];
        auto    out  = make({1, H, W, O}, out_bf16());
        auto    cols = std::make_shared<std::vector<float>>(H * W * C * kernel * kernel);
        tt_math m = math_;
        run([=] {
            // im2col with column order (c, ky, kx), the torch weight flattening.
            int64_t KK = (int64_t)kernel * kernel;
            float * cp = cols->data();
            for (int64_t y = 0; y < H; ++y) {
                for (int64_t xx = 0; xx < W; ++xx) {
                    float * row = cp + (y * W + xx) * C * KK;
                    for (int ky = 0; ky < kernel; ++ky) {
                        for (int kx = 0; kx < kernel; ++kx) {
                            int64_t sy = y + ky - pad, sx = xx + kx - pad;
                            bool    in = sy >= 0 && sy < H && sx >= 0 && sx < W;
                            const float * src = in ? x->ptr() + (sy * W + sx) * C : nullptr;
                            for (int64_t c = 0; c < C; ++c) {
                                row[c * KK + ky * kernel + kx] = in ? src[c] : 0.0f;
                            }
                        }
                    }
                }
            }
            device_gemm(*x, cp, *w, w->ptr(), true, (int)(H * W), (int)O, (int)(C * KK), out->ptr(), m);
            round(*out);
        });
        return out;
    }

    // The mask head's spatial ops: the kernels live in tt-ops-host-spatial.cpp; here the device numerics.
    tt_tensor upsample_bilinear(const tt_tensor & x_, int scale) override {
        auto x = as_host(x_, "upsample_bilinear");
        if (x->shape.size() != 4 || x->shape[0] != 1 || scale < 1) {
            shape_error("upsample_bilinear", "expected x[1,H,W,C] and scale >= 1, got " + tt_shape_str(x->shape) + ", scale " +
                                                 std::to_string(scale));
        }
        int64_t H = x->shape[1], W = x->shape[2], C = x->shape[3];
        auto    out = make({1, H * scale, W * scale, C}, out_bf16());
        run([=] {
            tt_kernel_upsample_bilinear(x->ptr(), H, W, C, scale, out->ptr());
            round(*out);
        });
        return out;
    }

    tt_tensor conv2d_depthwise(const tt_tensor & x_, const tt_tensor & w_, int kernel, int pad) override {
        auto x = as_host(x_, "conv2d_depthwise");
        auto w = as_host(w_, "conv2d_depthwise");
        if (x->shape.size() != 4 || x->shape[0] != 1 || w->shape != tt_shape{x->shape[3], 1, kernel, kernel}) {
            shape_error("conv2d_depthwise", "expected x[1,H,W,C] and w[C,1,k,k] with k=" + std::to_string(kernel) + ", got " +
                                                tt_shape_str(x->shape) + " and " + tt_shape_str(w->shape));
        }
        int64_t H = x->shape[1], W = x->shape[2], C = x->shape[3];
        auto    out = make(x->shape, out_bf16());
        tt_math m   = math_;
        run([=] {
            std::fill(out->data->begin(), out->data->end(), 0.0f);
            if (!bf16_) {
                tt_kernel_dwconv_accumulate(x->ptr(), H, W, C, w->ptr(), kernel, pad, out->ptr());
                return;
            }
            // k*k = 9 products per output: one accumulation step (< k_acc_depth), so only the operands and the
            // output rounding carry the device's numerics
            tt_operand_phases ph(x->ptr(), tt_numel(x->shape), x->bf16, w->ptr(), tt_numel(w->shape), w->bf16, m.fidelity);
            for (const auto & p : ph.phases) {
                tt_kernel_dwconv_accumulate(p.first, H, W, C, p.second, kernel, pad, out->ptr());
            }
            round(*out);
        });
        return out;
    }

    tt_tensor topk_indices(const tt_tensor & x_, int k) override {
        auto x = as_host(x_, "topk_indices");
        if (x->shape.size() != 2 || x->shape[0] != 1 || k <= 0 || k > x->shape[1]) {
            shape_error("topk_indices", "expected x[1,N] with 0 < k <= N, got " + tt_shape_str(x->shape) + ", k=" + std::to_string(k));
        }
        auto out   = make({1, k}, false);
        auto order = std::make_shared<std::vector<int>>(x->shape[1]);
        run([=] {
            const float * v = x->ptr();
            std::iota(order->begin(), order->end(), 0);
            std::partial_sort(order->begin(), order->begin() + k, order->end(),
                              [v](int a, int b) { return v[a] > v[b] || (v[a] == v[b] && a < b); });
            for (int i = 0; i < k; ++i) {
                out->ptr()[i] = (float)(*order)[i];
            }
        });
        return out;
    }

    tt_tensor gather_rows(const tt_tensor & table_, const tt_tensor & idx_) override {
        auto table = as_host(table_, "gather_rows");
        auto idx   = as_host(idx_, "gather_rows");
        if (table->shape.size() != 2 || idx->shape.size() != 2 || idx->shape[0] != 1) {
            shape_error("gather_rows", "expected table[N,C] and idx[1,K], got " + tt_shape_str(table->shape) + " and " +
                                           tt_shape_str(idx->shape));
        }
        int64_t N = table->shape[0], C = table->shape[1], K = idx->shape[1];
        auto    out = make({1, K, C}, table->bf16);
        run([=] {
            for (int64_t i = 0; i < K; ++i) {
                int64_t r = (int64_t)idx->ptr()[i];
                if (r < 0 || r >= N) {
                    shape_error("gather_rows", "index " + std::to_string(r) + " outside the table's " + std::to_string(N) + " rows");
                }
                std::memcpy(out->ptr() + i * C, table->ptr() + r * C, sizeof(float) * C);
            }
        });
        return out;
    }

    tt_tensor deformable_attn(const tt_tensor & value_, const tt_tensor & grid_, const tt_tensor & attn_) override {
        auto value = as_host(value_, "deformable_attn");
        auto grid  = as_host(grid_, "deformable_attn");
        auto attn  = as_host(attn_, "deformable_attn");
        if (value->shape.size() != 4 || grid->shape.size() != 4 || attn->shape.size() != 3 || grid->shape[2] != 1 ||
            grid->shape[3] != 2 || grid->shape[0] != value->shape[0] || attn->shape[0] != value->shape[0] ||
            attn->shape[1] * attn->shape[2] != grid->shape[1]) {
            shape_error("deformable_attn", "expected value[M,H,W,D], grid[M,Q*P,1,2], attn[M,Q,P], got " + tt_shape_str(value->shape) +
                                               ", " + tt_shape_str(grid->shape) + ", " + tt_shape_str(attn->shape));
        }
        int64_t M = value->shape[0], H = value->shape[1], W = value->shape[2], D = value->shape[3];
        int64_t Q = attn->shape[1], P = attn->shape[2];
        auto    out = make({M, Q, D}, out_bf16());
        run([=] {
            for (int64_t m = 0; m < M; ++m) {
                const float * vm = value->ptr() + m * H * W * D;
                for (int64_t q = 0; q < Q; ++q) {
                    float * o = out->ptr() + (m * Q + q) * D;
                    std::fill(o, o + D, 0.0f);
                    for (int64_t p = 0; p < P; ++p) {
                        const float * g  = grid->ptr() + (m * Q * P + q * P + p) * 2;
                        float         aw = attn->ptr()[(m * Q + q) * P + p];
                        // align_corners=False: pixel = ((g + 1) * size - 1) / 2
                        float px = ((g[0] + 1.0f) * (float)W - 1.0f) / 2.0f;
                        float py = ((g[1] + 1.0f) * (float)H - 1.0f) / 2.0f;
                        float x0f = std::floor(px), y0f = std::floor(py);
                        float fx = px - x0f, fy = py - y0f;
                        int64_t x0 = (int64_t)x0f, y0 = (int64_t)y0f;
                        const float wts[4] = {(1 - fx) * (1 - fy), fx * (1 - fy), (1 - fx) * fy, fx * fy};
                        const int64_t xs[4] = {x0, x0 + 1, x0, x0 + 1};
                        const int64_t ys[4] = {y0, y0, y0 + 1, y0 + 1};
                        for (int c = 0; c < 4; ++c) {
                            if (xs[c] < 0 || xs[c] >= W || ys[c] < 0 || ys[c] >= H) {
                                continue;  // zero padding, per corner
                            }
                            const float * vp = vm + (ys[c] * W + xs[c]) * D;
                            float         wc = wts[c] * aw;
                            for (int64_t d = 0; d < D; ++d) {
                                o[d] += wc * vp[d];
                            }
                        }
                    }
                }
            }
            round(*out);
        });
        return out;
    }

    tt_tensor reshape(const tt_tensor & x_, const tt_shape & shape) override {
        auto x = as_host(x_, "reshape");
        if (tt_numel(shape) != tt_numel(x->shape)) {
            shape_error("reshape", "cannot reshape " + tt_shape_str(x->shape) + " to " + tt_shape_str(shape));
        }
        auto out   = std::make_shared<host_tensor>();
        out->shape = shape;
        out->data  = x->data;
        out->bf16  = x->bf16;
        return out;
    }

    tt_tensor permute(const tt_tensor & x_, const std::vector<int> & perm) override {
        auto   x = as_host(x_, "permute");
        size_t r = x->shape.size();
        std::vector<bool> seen(r, false);
        bool ok = perm.size() == r;
        for (int p : perm) {
            ok = ok && p >= 0 && (size_t)p < r && !seen[p];
            if (ok) {
                seen[p] = true;
            }
        }
        if (!ok) {
            shape_error("permute", "permutation does not match rank " + std::to_string(r) + " of " + tt_shape_str(x->shape));
        }
        tt_shape             shape(r);
        std::vector<int64_t> in_strides(r), st(r);
        int64_t              s = 1;
        for (size_t d = r; d-- > 0;) {
            in_strides[d] = s;
            s *= x->shape[d];
        }
        for (size_t d = 0; d < r; ++d) {
            shape[d] = x->shape[perm[d]];
            st[d]    = in_strides[perm[d]];
        }
        auto out = make(shape, x->bf16);
        run([=] {
            const float * src = x->ptr();
            float *       o   = out->ptr();
            for_each_broadcast<1>(shape, {st}, [&](int64_t i, const std::array<int64_t, 1> & off) { o[i] = src[off[0]]; });
        });
        return out;
    }

    tt_tensor slice_last(const tt_tensor & x_, int64_t begin, int64_t end) override {
        auto    x = as_host(x_, "slice_last");
        int64_t C = x->shape.back();
        if (begin < 0 || end > C || begin >= end) {
            shape_error("slice_last", "range [" + std::to_string(begin) + "," + std::to_string(end) + ") outside the last dim of " +
                                          tt_shape_str(x->shape));
        }
        tt_shape shape = x->shape;
        shape.back()   = end - begin;
        auto out       = make(shape, x->bf16);
        run([=] {
            int64_t rows = tt_numel(x->shape) / C, n = end - begin;
            for (int64_t r = 0; r < rows; ++r) {
                std::memcpy(out->ptr() + r * n, x->ptr() + r * C + begin, sizeof(float) * n);
            }
        });
        return out;
    }

    tt_tensor concat_last(const std::vector<tt_tensor> & xs_) override {
        if (xs_.empty()) {
            shape_error("concat_last", "nothing to concatenate");
        }
        std::vector<host_ptr> xs;
        int64_t               total = 0;
        for (const auto & t : xs_) {
            xs.push_back(as_host(t, "concat_last"));
            tt_shape a = xs.back()->shape, b = xs.front()->shape;
            a.pop_back();
            b.pop_back();
            if (a != b) {
                shape_error("concat_last", "leading dims differ: " + tt_shape_str(xs.back()->shape) + " vs " +
                                               tt_shape_str(xs.front()->shape));
            }
            total += xs.back()->shape.back();
        }
        tt_shape shape = xs.front()->shape;
        shape.back()   = total;
        auto out       = make(shape, out_bf16());
        run([=] {
            int64_t rows = tt_numel(shape) / total, at = 0;
            for (const auto & t : xs) {
                int64_t n = t->shape.back();
                for (int64_t r = 0; r < rows; ++r) {
                    std::memcpy(out->ptr() + r * total + at, t->ptr() + r * n, sizeof(float) * n);
                }
                at += n;
            }
            round(*out);
        });
        return out;
    }

    void begin_trace_capture() override {
        check_open("begin_trace_capture");
        if (capturing_ || !trace_.empty()) {
            shape_error("begin_trace_capture", "a trace is already captured or being captured; release it first");
        }
        capturing_ = true;
    }
    void end_trace_capture() override {
        if (!capturing_) {
            shape_error("end_trace_capture", "no capture in progress");
        }
        capturing_ = false;
    }
    void execute_trace() override {
        check_open("execute_trace");
        if (capturing_ || trace_.empty()) {
            shape_error("execute_trace", "no captured trace to execute");
        }
        for (auto & f : trace_) {
            f();
        }
    }
    void release_trace() override {
        trace_.clear();
        capturing_ = false;
    }
    void synchronize() override {}
    void close() override {
        trace_.clear();
        capturing_ = false;
        closed_    = true;
    }

  private:
    host_ptr make(const tt_shape & shape, bool bf16) {
        auto t   = std::make_shared<host_tensor>();
        t->shape = shape;
        t->data  = std::make_shared<std::vector<float>>(tt_numel(shape));
        t->bf16  = bf16;
        return t;
    }

    void round(host_tensor & t) const {
        if (bf16_ && t.bf16) {
            for (float & v : *t.data) {
                v = tt_round_bf16(v);
            }
        }
    }

    void run(std::function<void()> fn) {
        check_open("op");
        fn();
        if (capturing_) {
            trace_.push_back(std::move(fn));
        }
    }

    void check_open(const char * op) const {
        if (closed_) {
            shape_error(op, "the device is closed");
        }
    }

    static void check_linear(const host_ptr & x, const host_ptr & w, const host_ptr & b, const char * op) {
        if (w->shape.size() != 2 || x->shape.empty() || x->shape.back() != w->shape[0] ||
            (b && tt_numel(b->shape) != w->shape[1])) {
            shape_error(op, "expected x[...,K] @ w[K,N] + b[N], got x " + tt_shape_str(x->shape) + ", w " + tt_shape_str(w->shape) +
                                (b ? ", b " + tt_shape_str(b->shape) : std::string()));
        }
    }

    void gemm_bias(const host_tensor & x, const host_tensor & w, const host_tensor * b, host_tensor & out, const tt_math & m) const {
        int K = (int)w.shape[0], N = (int)w.shape[1];
        int M = (int)(tt_numel(x.shape) / K);
        device_gemm(x, x.ptr(), w, w.ptr(), false, M, N, K, out.ptr(), m);
        if (b) {
            float * o = out.ptr();
            for (int m = 0; m < M; ++m) {
                for (int n = 0; n < N; ++n) {
                    o[(int64_t)m * N + n] += b->ptr()[n];
                }
            }
        }
    }

    // out[M,N] = a[M,K] @ b (b [K,N], or [N,K] when b_trans) with the device's matmul numerics (bf16 precision):
    // fp32 operands read as tf32; a (in0) goes to SrcB, b (in1) to SrcA, truncated per the fidelity's phases;
    // without fp32 accumulation the running sum is rounded to bf16 after every k_acc_depth products of K.
    void device_gemm(const host_tensor & at, const float * a, const host_tensor & bt, const float * b, bool b_trans, int M, int N,
                     int K, float * out, const tt_math & m) const {
        CBLAS_TRANSPOSE tb  = b_trans ? CblasTrans : CblasNoTrans;
        int             ldb = b_trans ? K : N;
        if (!bf16_) {
            cblas_sgemm(CblasRowMajor, CblasNoTrans, tb, M, N, K, 1.0f, a, K, b, ldb, 0.0f, out, N);
            return;
        }
        tt_operand_phases ph(a, (size_t)M * K, at.bf16, b, (size_t)K * N, bt.bf16, m.fidelity);
        const auto &   phases = ph.phases;
        int step = m.fp32_acc ? K : k_acc_depth;
        for (int k0 = 0; k0 < K; k0 += step) {
            int kc = std::min(step, K - k0);
            for (size_t p = 0; p < phases.size(); ++p) {
                const float * bp = phases[p].second + (b_trans ? k0 : (size_t)k0 * N);
                cblas_sgemm(CblasRowMajor, CblasNoTrans, tb, M, N, kc, 1.0f, phases[p].first + k0, K, bp, ldb,
                            (k0 == 0 && p == 0) ? 0.0f : 1.0f, out, N);
            }
            if (!m.fp32_acc) {
                for (size_t i = 0; i < (size_t)M * N; ++i) out[i] = tt_round_bf16(out[i]);
            }
        }
    }

    bool out_bf16() const { return !math_.out_fp32; }

    template <typename F> tt_tensor unary(const tt_tensor & x_, const char * op, F f) {
        auto x   = as_host(x_, op);
        auto out = make(x->shape, out_bf16());
        run([=] {
            int64_t       n = tt_numel(x->shape);
            const float * s = x->ptr();
            float *       o = out->ptr();
            for (int64_t i = 0; i < n; ++i) {
                o[i] = f(s[i]);
            }
            round(*out);
        });
        return out;
    }

    template <typename F> tt_tensor binary(const tt_tensor & a_, const tt_tensor & b_, const char * op, F f) {
        auto     a     = as_host(a_, op);
        auto     b     = as_host(b_, op);
        tt_shape shape = broadcast_shape(a->shape, b->shape, op);
        auto     out   = make(shape, out_bf16());
        run([=] {
            std::array<std::vector<int64_t>, 2> st = {broadcast_strides(a->shape, shape), broadcast_strides(b->shape, shape)};
            const float *ap = a->ptr(), *bp = b->ptr();
            float *      o = out->ptr();
            for_each_broadcast<2>(shape, st, [&](int64_t i, const std::array<int64_t, 2> & off) { o[i] = f(ap[off[0]], bp[off[1]]); });
            round(*out);
        });
        return out;
    }

    bool                               bf16_;
    tt_math                            math_;
    bool                               capturing_ = false;
    bool                               closed_    = false;
    std::vector<std::function<void()>> trace_;
};

}  // namespace

std::unique_ptr<tt_ops> tt_ops_host_create(const std::string & precision, int threads) {
    if (precision != "fp32" && precision != "bf16") {
        throw error("tt_ops_host_create: expected precision fp32 or bf16 but received '" + precision +
                    "'; pass --precision fp32|bf16");
    }
    return std::make_unique<tt_ops_host>(precision == "bf16", threads);
}

}  // namespace tt
}  // namespace rfdetr
