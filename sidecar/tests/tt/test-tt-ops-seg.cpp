// Per-op tests of the mask head's host ops (RF-DETR Seg) against direct double-precision references written from
// torch's definitions, on odd sizes: the bilinear upsample (align_corners=False), the depthwise convolution, and
// the uploaded row indices; plus what --precision bf16 does to them.
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

// torch.nn.functional.interpolate(NCHW, size=(H*s, W*s), mode='bilinear', align_corners=False), written per output
// pixel from its definition, on channels-last data.
std::vector<double> ref_upsample(const std::vector<float> & x, int H, int W, int C, int s) {
    const int           OH = H * s, OW = W * s;
    std::vector<double> out((size_t)OH * OW * C);
    auto                src = [](int o, int in, int outn, int & i0, int & i1, double & l) {
        double v = ((double)o + 0.5) * (double)in / (double)outn - 0.5;
        if (v < 0) v = 0;
        i0 = (int)std::floor(v);
        if (i0 > in - 1) i0 = in - 1;
        i1 = std::min(i0 + 1, in - 1);
        l  = v - i0;
    };
    for (int oy = 0; oy < OH; ++oy) {
        for (int ox = 0; ox < OW; ++ox) {
            int    y0, y1, x0, x1;
            double ly, lx;
            src(oy, H, OH, y0, y1, ly);
            src(ox, W, OW, x0, x1, lx);
            for (int c = 0; c < C; ++c) {
                auto at = [&](int y, int xx) { return (double)x[((size_t)y * W + xx) * C + c]; };
                out[((size_t)oy * OW + ox) * C + c] =
                    (1 - ly) * ((1 - lx) * at(y0, x0) + lx * at(y0, x1)) + ly * ((1 - lx) * at(y1, x0) + lx * at(y1, x1));
            }
        }
    }
    return out;
}

// nn.Conv2d(C, C, k, padding=pad, groups=C, bias=False) on channels-last data, weight [C,1,k,k].
std::vector<double> ref_dwconv(const std::vector<float> & x, int H, int W, int C, const std::vector<float> & w, int k, int pad) {
    std::vector<double> out((size_t)H * W * C, 0.0);
    for (int c = 0; c < C; ++c) {
        for (int y = 0; y < H; ++y) {
            for (int xx = 0; xx < W; ++xx) {
                double s = 0;
                for (int ky = 0; ky < k; ++ky) {
                    for (int kx = 0; kx < k; ++kx) {
                        int sy = y - pad + ky, sx = xx - pad + kx;
                        if (sy >= 0 && sy < H && sx >= 0 && sx < W) {
                            s += (double)w[((size_t)c * k + ky) * k + kx] * x[((size_t)sy * W + sx) * C + c];
                        }
                    }
                }
                out[((size_t)y * W + xx) * C + c] = s;
            }
        }
    }
    return out;
}

double max_abs(const std::vector<float> & a, const std::vector<double> & b) {
    EXPECT_EQ(a.size(), b.size());
    double m = 0;
    for (size_t i = 0; i < a.size() && i < b.size(); ++i) {
        if (!std::isfinite(a[i])) return INFINITY;
        m = std::max(m, std::fabs(a[i] - b[i]));
    }
    return m;
}

}  // namespace

TEST(TtOpsSeg, UpsampleBilinearMatchesTorchAlignCornersFalse) {
    auto ops = tt_ops_host_create("fp32", 1);
    for (int s : {3, 2}) {
        const int H = 7, W = 5, C = 3;
        auto      x   = rnd((size_t)H * W * C, 11 + s);
        auto      out = ops->upsample_bilinear(ops->upload(x.data(), {1, H, W, C}, TT_DTYPE_FP32), s);
        ASSERT_EQ(out->shape, (tt_shape{1, H * s, W * s, C}));
        EXPECT_LE(max_abs(get(*ops, out), ref_upsample(x, H, W, C, s)), 1e-6) << "scale " << s;
    }
}

TEST(TtOpsSeg, UpsampleEdgesClampAndCentresInterpolate) {
    // one channel, a ramp along x: the first output column clamps to column 0, the last to column W-1
    auto                ops = tt_ops_host_create("fp32", 1);
    const int           W   = 4;
    std::vector<float>  x   = {0, 1, 2, 3};
    auto                out = get(*ops, ops->upsample_bilinear(ops->upload(x.data(), {1, 1, W, 1}, TT_DTYPE_FP32), 3));
    std::vector<double> want(36);  // 3 identical rows (H = 1)
    for (int o = 0; o < 36; ++o) {
        want[o] = std::min(std::max((o % 12 + 0.5) / 3.0 - 0.5, 0.0), 3.0);
    }
    EXPECT_LE(max_abs(out, want), 1e-6);
}

TEST(TtOpsSeg, DepthwiseConvMatchesGroupedConvWithZeroPadding) {
    auto      ops = tt_ops_host_create("fp32", 1);
    const int H = 6, W = 9, C = 5, k = 3;
    auto      x = rnd((size_t)H * W * C, 21), w = rnd((size_t)C * k * k, 22);
    auto      out = ops->conv2d_depthwise(ops->upload(x.data(), {1, H, W, C}, TT_DTYPE_FP32),
                                          ops->upload(w.data(), {C, 1, k, k}, TT_DTYPE_FP32), k, 1);
    ASSERT_EQ(out->shape, (tt_shape{1, H, W, C}));
    EXPECT_LE(max_abs(get(*ops, out), ref_dwconv(x, H, W, C, w, k, 1)), 1e-6);
}

TEST(TtOpsSeg, DepthwiseConvRefusesAFullConvWeight) {
    auto               ops = tt_ops_host_create("fp32", 1);
    std::vector<float> x(2 * 2 * 4), w(4 * 4 * 9);
    EXPECT_THROW(ops->conv2d_depthwise(ops->upload(x.data(), {1, 2, 2, 4}, TT_DTYPE_FP32), ops->upload(w.data(), {4, 4, 3, 3}, TT_DTYPE_FP32), 3, 1),
                 error);
}

TEST(TtOpsSeg, Bf16PrecisionRoundsOutputsAndStaysCloseToTheReference) {
    auto      ops = tt_ops_host_create("bf16", 1);
    const int H = 5, W = 7, C = 6, k = 3;
    auto      x = rnd((size_t)H * W * C, 31), w = rnd((size_t)C * k * k, 32);
    for (float & v : x) v = tt_round_bf16(v);
    auto dw = get(*ops, ops->conv2d_depthwise(ops->upload(x.data(), {1, H, W, C}, TT_DTYPE_BF16),
                                              ops->upload(w.data(), {C, 1, k, k}, TT_DTYPE_FP32), k, 1));
    auto us = get(*ops, ops->upsample_bilinear(ops->upload(x.data(), {1, H, W, C}, TT_DTYPE_BF16), 3));
    for (float v : dw) ASSERT_EQ(v, tt_round_bf16(v));
    for (float v : us) ASSERT_EQ(v, tt_round_bf16(v));
    const double e_dw = max_abs(dw, ref_dwconv(x, H, W, C, w, k, 1)), e_us = max_abs(us, ref_upsample(x, H, W, C, 3));
    EXPECT_GT(e_dw, 0.0) << "bf16 changed nothing";
    EXPECT_LE(e_dw, 0.03);
    EXPECT_LE(e_us, 0.01);
}

TEST(TtOpsSeg, UploadedIndicesGatherThoseRowsInOrder) {
    auto               ops   = tt_ops_host_create("fp32", 1);
    const int          N = 9, C = 4;
    auto               table = rnd((size_t)N * C, 41);
    std::vector<int>   idx   = {8, 0, 3, 3};
    auto               out   = get(*ops, ops->gather_rows(ops->upload(table.data(), {N, C}, TT_DTYPE_FP32), ops->upload_indices(idx)));
    ASSERT_EQ(out.size(), idx.size() * C);
    for (size_t r = 0; r < idx.size(); ++r) {
        for (int c = 0; c < C; ++c) {
            EXPECT_EQ(out[r * C + c], table[(size_t)idx[r] * C + c]) << "row " << r;
        }
    }
}
