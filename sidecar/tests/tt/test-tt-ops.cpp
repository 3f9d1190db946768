// Per-op tests of the host implementation of the TT op vocabulary against plain (double-precision, direct)
// references on odd sizes, the bf16 rounding rule, and the emulated trace.
#include "engines/engine.h"
#include "engines/tt/tt-ops.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

using namespace rfdetr;
using namespace rfdetr::tt;

namespace {

std::vector<float> rnd(size_t n, uint32_t seed, float lo = -1.0f, float hi = 1.0f) {
    std::mt19937                          g(seed);
    std::uniform_real_distribution<float> d(lo, hi);
    std::vector<float>                    v(n);
    for (auto & x : v) {
        x = d(g);
    }
    return v;
}

std::vector<float> get(tt_ops & ops, const tt_tensor & t) {
    std::vector<float> v(tt_numel(t->shape));
    ops.read(t, v.data());
    return v;
}

void expect_near_all(const std::vector<float> & got, const std::vector<double> & want, double tol) {
    ASSERT_EQ(got.size(), want.size());
    for (size_t i = 0; i < got.size(); ++i) {
        ASSERT_TRUE(std::isfinite(got[i])) << "non-finite at " << i;
        ASSERT_NEAR(got[i], want[i], tol * (1.0 + std::fabs(want[i]))) << "at " << i;
    }
}

struct OpsTest : ::testing::Test {
    std::unique_ptr<tt_ops> ops = tt_ops_host_create("fp32", 1);
    tt_tensor up(const std::vector<float> & v, const tt_shape & s) { return ops->upload(v.data(), s, TT_DTYPE_BF16); }
};

}  // namespace

TEST_F(OpsTest, LinearWithBiasAndReluMatchesDirectSum) {
    const int M = 7, K = 13, N = 5;
    auto      x = rnd(3 * M * K, 1), w = rnd(K * N, 2), b = rnd(N, 3);
    for (tt_act act : {TT_ACT_NONE, TT_ACT_RELU}) {
        auto                out = get(*ops, ops->linear(up(x, {3, M, K}), up(w, {K, N}), up(b, {1, N}), act));
        std::vector<double> want(3 * M * N);
        for (int m = 0; m < 3 * M; ++m) {
            for (int n = 0; n < N; ++n) {
                double s = b[n];
                for (int k = 0; k < K; ++k) {
                    s += (double)x[m * K + k] * w[k * N + n];
                }
                want[m * N + n] = act == TT_ACT_RELU ? std::max(s, 0.0) : s;
            }
        }
        expect_near_all(out, want, 1e-5);
    }
}

TEST_F(OpsTest, LinearAddcmulBroadcastsResidualAndScale) {
    const int M = 9, K = 11, N = 6;
    auto      x = rnd(M * K, 4), w = rnd(K * N, 5), b = rnd(N, 6), r = rnd(M * N, 7), s = rnd(N, 8);
    auto      out = get(*ops, ops->linear_addcmul(up(x, {1, M, K}), up(w, {K, N}), up(b, {1, N}), up(r, {1, M, N}), up(s, {1, N})));
    std::vector<double> want(M * N);
    for (int m = 0; m < M; ++m) {
        for (int n = 0; n < N; ++n) {
            double acc = b[n];
            for (int k = 0; k < K; ++k) {
                acc += (double)x[m * K + k] * w[k * N + n];
            }
            want[m * N + n] = r[m * N + n] + acc * s[n];
        }
    }
    expect_near_all(out, want, 1e-5);
    // a null scale means 1, a null bias means 0
    auto out2 = get(*ops, ops->linear_addcmul(up(x, {1, M, K}), up(w, {K, N}), nullptr, up(r, {1, M, N}), nullptr));
    for (int m = 0; m < M; ++m) {
        for (int n = 0; n < N; ++n) {
            double acc = r[m * N + n];
            for (int k = 0; k < K; ++k) {
                acc += (double)x[m * K + k] * w[k * N + n];
            }
            ASSERT_NEAR(out2[m * N + n], acc, 1e-5);
        }
    }
}

TEST_F(OpsTest, MatmulWithPermutationSelectsRows) {
    const int M = 5, K = 7, N = 3;
    auto      x = rnd(K * N, 9);
    std::vector<float> p(M * K, 0.0f);
    const int          src[M] = {6, 0, 3, 2, 5};
    for (int m = 0; m < M; ++m) {
        p[m * K + src[m]] = 1.0f;
    }
    auto out = get(*ops, ops->matmul(up(p, {M, K}), up(x, {K, N})));
    for (int m = 0; m < M; ++m) {
        for (int n = 0; n < N; ++n) {
            ASSERT_EQ(out[m * N + n], x[src[m] * N + n]) << "a 0/1 matmul must copy rows exactly";
        }
    }
}

TEST_F(OpsTest, SplitHeadsSdpaConcatHeadsMatchNaiveAttention) {
    const int B = 2, S = 11, H = 3, D = 5;
    auto      qkv   = rnd(B * S * 3 * H * D, 10, -2.0f, 2.0f);
    float     scale = 0.37f;
    auto      hv    = ops->split_heads(up(qkv, {B, S, 3 * H * D}), H);
    ASSERT_EQ(hv[0]->shape, (tt_shape{B, H, S, D}));
    auto out = get(*ops, ops->concat_heads(ops->sdpa(hv[0], hv[1], hv[2], scale)));
    ASSERT_EQ(out.size(), (size_t)B * S * H * D);
    auto at = [&](int b, int s, int part, int h, int d) { return (double)qkv[((b * S + s) * 3 + part) * H * D + h * D + d]; };
    std::vector<double> want(B * S * H * D);
    for (int b = 0; b < B; ++b) {
        for (int h = 0; h < H; ++h) {
            for (int i = 0; i < S; ++i) {
                std::vector<double> sc(S);
                double              mx = -1e300, sum = 0;
                for (int j = 0; j < S; ++j) {
                    double dot = 0;
                    for (int d = 0; d < D; ++d) {
                        dot += at(b, i, 0, h, d) * at(b, j, 1, h, d);
                    }
                    sc[j] = dot * scale;
                    mx    = std::max(mx, sc[j]);
                }
                for (int j = 0; j < S; ++j) {
                    sc[j] = std::exp(sc[j] - mx);
                    sum += sc[j];
                }
                for (int d = 0; d < D; ++d) {
                    double o = 0;
                    for (int j = 0; j < S; ++j) {
                        o += sc[j] / sum * at(b, j, 2, h, d);
                    }
                    want[(b * S + i) * H * D + h * D + d] = o;
                }
            }
        }
    }
    expect_near_all(out, want, 2e-6);
}

TEST_F(OpsTest, LayerNormMatchesDoubleReference) {
    const int R = 7, C = 37;
    auto      x = rnd(R * C, 11, -3.0f, 5.0f), w = rnd(C, 12), b = rnd(C, 13);
    for (float eps : {1e-6f, 1e-5f}) {
        auto                out = get(*ops, ops->layer_norm(up(x, {1, R, C}), up(w, {1, C}), up(b, {1, C}), eps));
        std::vector<double> want(R * C);
        for (int r = 0; r < R; ++r) {
            double mean = 0, var = 0;
            for (int c = 0; c < C; ++c) {
                mean += x[r * C + c];
            }
            mean /= C;
            for (int c = 0; c < C; ++c) {
                var += (x[r * C + c] - mean) * (x[r * C + c] - mean);
            }
            var /= C;
            for (int c = 0; c < C; ++c) {
                want[r * C + c] = (x[r * C + c] - mean) / std::sqrt(var + eps) * w[c] + b[c];
            }
        }
        expect_near_all(out, want, 2e-6);
    }
}

TEST_F(OpsTest, UnaryActivationsMatchFormulas) {
    auto                x = rnd(53, 14, -6.0f, 6.0f);
    auto                t = up(x, {53});
    std::vector<double> g(53), s(53), r(53), e(53), sn(53), cs(53);
    for (int i = 0; i < 53; ++i) {
        double v = x[i];
        g[i]     = 0.5 * v * (1.0 + std::erf(v / std::sqrt(2.0)));  // exact erf GELU, not the tanh form
        s[i]     = v / (1.0 + std::exp(-v));
        r[i]     = v > 0 ? v : 0;
        e[i]     = std::exp(v);
        sn[i]    = std::sin(v);
        cs[i]    = std::cos(v);
    }
    expect_near_all(get(*ops, ops->gelu(t)), g, 1e-6);
    expect_near_all(get(*ops, ops->silu(t)), s, 1e-6);
    expect_near_all(get(*ops, ops->relu(t)), r, 0);
    expect_near_all(get(*ops, ops->exp(t)), e, 1e-6);
    expect_near_all(get(*ops, ops->sin(t)), sn, 1e-6);
    expect_near_all(get(*ops, ops->cos(t)), cs, 1e-6);
}

TEST_F(OpsTest, SoftmaxAndMaxOverLastDim) {
    const int R = 5, C = 3;
    auto      x  = rnd(R * C, 15, -40.0f, 40.0f);  // large logits: softmax must subtract the max
    auto      sm = get(*ops, ops->softmax(up(x, {R, C})));
    auto      mx = get(*ops, ops->max(up(x, {R, C})));
    ASSERT_EQ(mx.size(), (size_t)R);
    for (int r = 0; r < R; ++r) {
        double m = *std::max_element(x.begin() + r * C, x.begin() + (r + 1) * C), sum = 0;
        EXPECT_EQ(mx[r], (float)m);
        for (int c = 0; c < C; ++c) {
            sum += std::exp(x[r * C + c] - m);
        }
        for (int c = 0; c < C; ++c) {
            ASSERT_NEAR(sm[r * C + c], std::exp(x[r * C + c] - m) / sum, 1e-6);
        }
    }
}

TEST_F(OpsTest, BinaryOpsAndWhereBroadcast) {
    auto a = rnd(3 * 5 * 7, 16), b = rnd(7, 17), m = std::vector<float>{1, 0, 1, 1, 0, 0, 1};
    auto sum  = get(*ops, ops->add(up(a, {3, 5, 7}), up(b, {1, 1, 7})));
    auto prod = get(*ops, ops->multiply(up(b, {7}), up(a, {3, 5, 7})));
    auto wh   = get(*ops, ops->where(up(m, {1, 7}), up(a, {3, 5, 7}), up(b, {7})));
    for (int i = 0; i < 105; ++i) {
        ASSERT_EQ(sum[i], a[i] + b[i % 7]);
        ASSERT_EQ(prod[i], a[i] * b[i % 7]);
        ASSERT_EQ(wh[i], m[i % 7] != 0 ? a[i] : b[i % 7]);
    }
    EXPECT_THROW(ops->add(up(a, {3, 5, 7}), up(b, {7, 1})), error);
}

TEST_F(OpsTest, Conv2dChannelsLastMatchesDirectConvolution) {
    const int H = 7, W = 9, C = 5, O = 4, k = 3, pad = 1;
    auto      x = rnd(H * W * C, 18), w = rnd(O * C * k * k, 19);
    auto      out = get(*ops, ops->conv2d(up(x, {1, H, W, C}), up(w, {O, C, k, k}), k, pad));
    std::vector<double> want(H * W * O, 0.0);
    for (int o = 0; o < O; ++o) {
        for (int y = 0; y < H; ++y) {
            for (int xx = 0; xx < W; ++xx) {
                double s = 0;
                for (int c = 0; c < C; ++c) {
                    for (int ky = 0; ky < k; ++ky) {
                        for (int kx = 0; kx < k; ++kx) {
                            int sy = y + ky - pad, sx = xx + kx - pad;
                            if (sy >= 0 && sy < H && sx >= 0 && sx < W) {
                                s += (double)x[(sy * W + sx) * C + c] * w[((o * C + c) * k + ky) * k + kx];
                            }
                        }
                    }
                }
                want[(y * W + xx) * O + o] = s;
            }
        }
    }
    expect_near_all(out, want, 1e-5);
}

TEST_F(OpsTest, TopkDescendingWithLowerIndexFirstOnTies) {
    std::vector<float> v = {0.5f, 2.0f, -1.0f, 2.0f, 0.5f, 3.0f, 0.5f};
    auto               idx = get(*ops, ops->topk_indices(up(v, {1, 7}), 5));
    EXPECT_EQ(idx, (std::vector<float>{5, 1, 3, 0, 4}));
    EXPECT_THROW(ops->topk_indices(up(v, {1, 7}), 8), error);
}

TEST_F(OpsTest, GatherRowsByIndex) {
    auto table = rnd(11 * 3, 20);
    auto idx   = ops->upload(std::vector<float>{10, 0, 4, 4}.data(), {1, 4}, TT_DTYPE_FP32);
    auto out   = get(*ops, ops->gather_rows(up(table, {11, 3}), idx));
    const int rows[4] = {10, 0, 4, 4};
    for (int i = 0; i < 4; ++i) {
        for (int c = 0; c < 3; ++c) {
            ASSERT_EQ(out[i * 3 + c], table[rows[i] * 3 + c]);
        }
    }
    auto bad = ops->upload(std::vector<float>{11}.data(), {1, 1}, TT_DTYPE_FP32);
    EXPECT_THROW(ops->gather_rows(up(table, {11, 3}), bad), error);
}

// grid_sample(bilinear, zeros, align_corners=False) written the torch way, in double, per head and point.
TEST_F(OpsTest, DeformableAttnMatchesGridSampleReference) {
    const int M = 3, H = 5, W = 7, D = 4, Q = 6, P = 2;
    auto      value = rnd(M * H * W * D, 21);
    auto      grid  = rnd(M * Q * P * 2, 22, -1.3f, 1.3f);  // some points outside [-1,1]: per-corner zero padding
    auto      attn  = rnd(M * Q * P, 23, 0.0f, 1.0f);
    auto      out   = get(*ops, ops->deformable_attn(up(value, {M, H, W, D}), up(grid, {M, Q * P, 1, 2}), up(attn, {M, Q, P})));
    std::vector<double> want(M * Q * D, 0.0);
    for (int m = 0; m < M; ++m) {
        for (int q = 0; q < Q; ++q) {
            for (int p = 0; p < P; ++p) {
                double gx = grid[((m * Q + q) * P + p) * 2], gy = grid[((m * Q + q) * P + p) * 2 + 1];
                double ix = ((gx + 1) * W - 1) / 2, iy = ((gy + 1) * H - 1) / 2;
                int    x0 = (int)std::floor(ix), y0 = (int)std::floor(iy);
                for (int dy = 0; dy <= 1; ++dy) {
                    for (int dx = 0; dx <= 1; ++dx) {
                        int xx = x0 + dx, yy = y0 + dy;
                        if (xx < 0 || xx >= W || yy < 0 || yy >= H) {
                            continue;
                        }
                        double wx = dx ? ix - x0 : 1 - (ix - x0), wy = dy ? iy - y0 : 1 - (iy - y0);
                        for (int d = 0; d < D; ++d) {
                            want[(m * Q + q) * D + d] += attn[(m * Q + q) * P + p] * wx * wy * value[((m * H + yy) * W + xx) * D + d];
                        }
                    }
                }
            }
        }
    }
    expect_near_all(out, want, 2e-6);
}

TEST_F(OpsTest, DataMovement) {
    auto x   = rnd(2 * 3 * 5, 24);
    auto t   = up(x, {2, 3, 5});
    auto p   = get(*ops, ops->permute(t, {2, 0, 1}));  // [5,2,3]
    for (int a = 0; a < 2; ++a) {
        for (int b = 0; b < 3; ++b) {
            for (int c = 0; c < 5; ++c) {
                ASSERT_EQ(p[(c * 2 + a) * 3 + b], x[(a * 3 + b) * 5 + c]);
            }
        }
    }
    auto s = get(*ops, ops->slice_last(t, 1, 4));
    auto c = get(*ops, ops->concat_last({ops->slice_last(t, 0, 1), ops->slice_last(t, 1, 5)}));
    EXPECT_EQ(c, x);
    for (int r = 0; r < 6; ++r) {
        for (int j = 0; j < 3; ++j) {
            ASSERT_EQ(s[r * 3 + j], x[r * 5 + 1 + j]);
        }
    }
    EXPECT_EQ(ops->reshape(t, {6, 5})->shape, (tt_shape{6, 5}));
    EXPECT_THROW(ops->reshape(t, {7, 5}), error);
    EXPECT_THROW(ops->permute(t, {0, 0, 1}), error);
}

TEST(TtBf16, RoundToNearestEven) {
    EXPECT_EQ(tt_round_bf16(1.0f), 1.0f);
    EXPECT_EQ(tt_round_bf16(1.0f + 1.0f / 256.0f), 1.0f);                  // exactly half an ulp: ties to even
    EXPECT_EQ(tt_round_bf16(1.0f + 3.0f / 256.0f), 1.0f + 1.0f / 64.0f);   // half an ulp above an odd: up
    EXPECT_EQ(tt_round_bf16(1.0f + 1.0f / 128.0f), 1.0f + 1.0f / 128.0f);  // representable
    EXPECT_EQ(tt_round_bf16(-3.14159265f), -3.140625f);
    EXPECT_TRUE(std::isnan(tt_round_bf16(NAN)));
    EXPECT_EQ(tt_round_bf16(INFINITY), INFINITY);
}

TEST(TtBf16, Bf16PrecisionRoundsDeviceTensorsButNotFp32Ones) {
    auto               ops = tt_ops_host_create("bf16", 1);
    std::vector<float> v   = {1.001f, 3.14159265f};
    auto               b   = ops->upload(v.data(), {2}, TT_DTYPE_BF16);
    auto               f   = ops->upload(v.data(), {2}, TT_DTYPE_FP32);
    std::vector<float> rb(2), rf(2), rs(2);
    ops->read(b, rb.data());
    ops->read(f, rf.data());
    EXPECT_EQ(rb, (std::vector<float>{1.0f, 3.140625f}));
    EXPECT_EQ(rf, v);
    ops->read(ops->add(f, f), rs.data());  // op outputs are bf16 activations
    EXPECT_EQ(rs[1], tt_round_bf16(2.0f * 3.14159265f));
    EXPECT_THROW(tt_ops_host_create("fp16", 1), error);
}

TEST(TtTrace, ReplayRecomputesFromTheCurrentInput) {
    auto               ops = tt_ops_host_create("fp32", 1);
    std::vector<float> w   = rnd(4 * 3, 30), x1 = rnd(2 * 4, 31), x2 = rnd(2 * 4, 32);
    auto               wt  = ops->upload(w.data(), {4, 3}, TT_DTYPE_BF16);
    auto               in  = ops->upload(x1.data(), {2, 4}, TT_DTYPE_FP32);
    ops->begin_trace_capture();
    EXPECT_THROW(ops->upload(x1.data(), {2, 4}, TT_DTYPE_FP32), error);  // no allocation while capturing
    auto out = ops->exp(ops->linear(in, wt, nullptr, TT_ACT_NONE));
    ops->end_trace_capture();
    // the eager reference for x2
    auto in2  = ops->upload(x2.data(), {2, 4}, TT_DTYPE_FP32);
    auto ref2 = get(*ops, ops->exp(ops->linear(in2, wt, nullptr, TT_ACT_NONE)));
    auto got1 = get(*ops, out);
    ops->write(in, x2.data());
    EXPECT_EQ(get(*ops, out), got1) << "outputs change only on replay";
    ops->execute_trace();
    EXPECT_EQ(get(*ops, out), ref2);
    ops->release_trace();
    EXPECT_THROW(ops->execute_trace(), error);
    ops->close();
    EXPECT_THROW(ops->upload(x1.data(), {2, 4}, TT_DTYPE_FP32), error);
}
