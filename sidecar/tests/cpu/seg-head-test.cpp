// The RF-DETR Seg mask head (seg-head.h) against a plain-loop float64 implementation written from upstream's
// module in its own layout (channels-first maps, one query at a time), on odd sizes, per GEMM kernel: every
// intermediate map, the query features and the mask rows of an arbitrary query selection; and that a call
// writes exactly the rows asked for. Then the head alone on each Seg fixture's own inputs (the golden
// projector.out and decoder.hs_last, the head's weights from the synthetic generator): its intermediates and mask
// logits against the golden's, so the head's error is seen apart from the backbone's.
#include "engines/cpu/seg-head.h"
#include "engines/cpu/thread-pool.h"
#include "model/synth.h"

#include "golden-file.h"
#include "isa-test.h"
#include "random-vec.h"
#include "skip.h"

#include <nlohmann/json.hpp>

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <map>
#include <numeric>
#include <string>
#include <vector>

namespace {

using rfdetr::test::random_vec;
namespace cpu = rfdetr::cpu;

struct head_case {
    cpu::seg_head_dims d;
    std::vector<std::vector<float>> blk;  // per block: dw_w, dw_b, ln_g, ln_b, pw_w, pw_b (flattened 6 each)
    std::vector<float> sp_w, sp_b, qn_g, qn_b, q1_w, q1_b, q2_w, q2_b, qp_w, qp_b, memory, hs;
    float              bias = 0.37f;
    cpu::seg_head_weights w;

    head_case(int grid, int side, int dim, int blocks, int hidden, int queries) {
        d  = {grid, side, dim, blocks, hidden, queries};
        uint32_t s = 100;
        // Scales like the synthetic checkpoints' (weights ~ 1/sqrt(fan-in)), so activations stay O(1).
        const float wd = 1.0f / std::sqrt(static_cast<float>(dim)), wh = 1.0f / std::sqrt(static_cast<float>(hidden));
        for (int b = 0; b < blocks; ++b) {
            blk.push_back(random_vec(static_cast<size_t>(dim) * 9, ++s, -0.4f, 0.4f));
            blk.push_back(random_vec(dim, ++s, -0.1f, 0.1f));
            blk.push_back(random_vec(dim, ++s, 0.8f, 1.2f));
            blk.push_back(random_vec(dim, ++s, -0.1f, 0.1f));
            blk.push_back(random_vec(static_cast<size_t>(dim) * dim, ++s, -wd, wd));
            blk.push_back(random_vec(dim, ++s, -0.1f, 0.1f));
        }
        sp_w   = random_vec(static_cast<size_t>(dim) * dim, ++s, -wd, wd);
        sp_b   = random_vec(dim, ++s, -0.1f, 0.1f);
        qn_g   = random_vec(dim, ++s, 0.8f, 1.2f);
        qn_b   = random_vec(dim, ++s, -0.1f, 0.1f);
        q1_w   = random_vec(static_cast<size_t>(hidden) * dim, ++s, -wd, wd);
        q1_b   = random_vec(hidden, ++s, -0.1f, 0.1f);
        q2_w   = random_vec(static_cast<size_t>(dim) * hidden, ++s, -wh, wh);
        q2_b   = random_vec(dim, ++s, -0.1f, 0.1f);
        qp_w   = random_vec(static_cast<size_t>(dim) * dim, ++s, -wd, wd);
        qp_b   = random_vec(dim, ++s, -0.1f, 0.1f);
        memory = random_vec(static_cast<size_t>(grid) * grid * dim, ++s, -3.0f, 3.0f);
        hs     = random_vec(static_cast<size_t>(queries) * dim, ++s, -2.0f, 2.0f);
        for (int b = 0; b < blocks; ++b) {
            const auto * p = &blk[6 * b];
            w.blocks.push_back({p[0].data(), p[1].data(), p[2].data(), p[3].data(), p[4].data(), p[5].data()});
        }
        w.sp_w = sp_w.data(), w.sp_b = sp_b.data(), w.qn_g = qn_g.data(), w.qn_b = qn_b.data();
        w.q1_w = q1_w.data(), w.q1_b = q1_b.data(), w.q2_w = q2_w.data(), w.q2_b = q2_b.data();
        w.qp_w = qp_w.data(), w.qp_b = qp_b.data(), w.bias = bias;
    }
};

// ---- the float64 reference: channels-first [c][y][x], as upstream's module computes it ----

using map_t = std::vector<double>;  // [dim][side][side]

double gelu(double x) { return 0.5 * x * (1.0 + std::erf(x / std::sqrt(2.0))); }

void layernorm(std::vector<double> & v, const float * g, const float * b, double eps) {
    double mean = 0, var = 0;
    for (double x : v) mean += x;
    mean /= v.size();
    for (double x : v) var += (x - mean) * (x - mean);
    var /= v.size();
    for (size_t i = 0; i < v.size(); ++i) v[i] = (v[i] - mean) / std::sqrt(var + eps) * g[i] + b[i];
}

// F.interpolate(bilinear, align_corners=False) source coordinate: (o + 0.5) * in / out - 0.5, clamped at 0.
void src_coord(int in, int out, int o, int & i0, int & i1, double & l) {
    const double real = std::max((o + 0.5) * static_cast<double>(static_cast<float>(in) / out) - 0.5, 0.0);
    i0                = std::min(static_cast<int>(real), in - 1);
    i1                = std::min(i0 + 1, in - 1);
    l                 = real - i0;
}

struct reference {
    std::map<std::string, map_t> maps;  // "spatial_upsampled", "block_out.i", "spatial_proj"
    std::vector<std::vector<double>> qf, masks;  // per query of the full set
};

reference run_reference(const head_case & c) {
    const int G = c.d.grid, M = c.d.side, D = c.d.dim, H = c.d.hidden, P = M * M;
    reference r;
    map_t     x(static_cast<size_t>(D) * P);
    for (int oy = 0; oy < M; ++oy) {
        int y0, y1;
        double ly;
        src_coord(G, M, oy, y0, y1, ly);
        for (int ox = 0; ox < M; ++ox) {
            int x0, x1;
            double lx;
            src_coord(G, M, ox, x0, x1, lx);
            for (int ch = 0; ch < D; ++ch) {
                auto at = [&](int yy, int xx) { return static_cast<double>(c.memory[static_cast<size_t>(yy * G + xx) * D + ch]); };
                x[static_cast<size_t>(ch) * P + oy * M + ox] =
                    (1 - ly) * ((1 - lx) * at(y0, x0) + lx * at(y0, x1)) + ly * ((1 - lx) * at(y1, x0) + lx * at(y1, x1));
            }
        }
    }
    r.maps["spatial_upsampled"] = x;
    for (int b = 0; b < c.d.blocks; ++b) {
        const float * dw_w = c.blk[6 * b].data(), *dw_b = c.blk[6 * b + 1].data(), *g = c.blk[6 * b + 2].data(),
                    *be = c.blk[6 * b + 3].data(), *pw = c.blk[6 * b + 4].data(), *pb = c.blk[6 * b + 5].data();
        map_t conv(x.size());
        for (int ch = 0; ch < D; ++ch) {
            for (int i = 0; i < M; ++i) {
                for (int j = 0; j < M; ++j) {
                    double acc = dw_b[ch];
                    for (int ky = 0; ky < 3; ++ky) {
                        for (int kx = 0; kx < 3; ++kx) {
                            const int ii = i + ky - 1, jj = j + kx - 1;
                            if (ii >= 0 && ii < M && jj >= 0 && jj < M) acc += dw_w[ch * 9 + ky * 3 + kx] * x[static_cast<size_t>(ch) * P + ii * M + jj];
                        }
                    }
                    conv[static_cast<size_t>(ch) * P + i * M + j] = acc;
                }
            }
        }
        for (int p = 0; p < P; ++p) {
            std::vector<double> v(D);
            for (int ch = 0; ch < D; ++ch) v[ch] = conv[static_cast<size_t>(ch) * P + p];
            layernorm(v, g, be, 1e-6);
            for (int o = 0; o < D; ++o) {
                double acc = pb[o];
                for (int ch = 0; ch < D; ++ch) acc += static_cast<double>(pw[static_cast<size_t>(o) * D + ch]) * v[ch];
                x[static_cast<size_t>(o) * P + p] += gelu(acc);
            }
        }
        r.maps["block_out." + std::to_string(b)] = x;
    }
    map_t s(x.size());
    for (int o = 0; o < D; ++o) {
        for (int p = 0; p < P; ++p) {
            double acc = c.sp_b[o];
            for (int ch = 0; ch < D; ++ch) acc += static_cast<double>(c.sp_w[static_cast<size_t>(o) * D + ch]) * x[static_cast<size_t>(ch) * P + p];
            s[static_cast<size_t>(o) * P + p] = acc;
        }
    }
    r.maps["spatial_proj"] = s;
    for (int q = 0; q < c.d.queries; ++q) {
        std::vector<double> h(c.hs.begin() + static_cast<size_t>(q) * D, c.hs.begin() + static_cast<size_t>(q + 1) * D), n = h;
        layernorm(n, c.qn_g.data(), c.qn_b.data(), 1e-5);
        std::vector<double> hid(H), f(D);
        for (int o = 0; o < H; ++o) {
            double acc = c.q1_b[o];
            for (int ch = 0; ch < D; ++ch) acc += static_cast<double>(c.q1_w[static_cast<size_t>(o) * D + ch]) * n[ch];
            hid[o] = gelu(acc);
        }
        for (int o = 0; o < D; ++o) {
            double acc = c.q2_b[o];
            for (int i = 0; i < H; ++i) acc += static_cast<double>(c.q2_w[static_cast<size_t>(o) * H + i]) * hid[i];
            h[o] += acc;
        }
        for (int o = 0; o < D; ++o) {
            double acc = c.qp_b[o];
            for (int ch = 0; ch < D; ++ch) acc += static_cast<double>(c.qp_w[static_cast<size_t>(o) * D + ch]) * h[ch];
            f[o] = acc;
        }
        std::vector<double> m(P);
        for (int p = 0; p < P; ++p) {
            double acc = 0;
            for (int ch = 0; ch < D; ++ch) acc += f[ch] * s[static_cast<size_t>(ch) * P + p];
            m[p] = acc + c.bias;
        }
        r.qf.push_back(f);
        r.masks.push_back(m);
    }
    return r;
}

// max |ours - ref| / max(1, |ref|) of a pixel-major map against a channels-first one.
double map_err(const float * ours, const map_t & ref, int pixels, int dim) {
    double e = 0;
    for (int p = 0; p < pixels; ++p) {
        for (int ch = 0; ch < dim; ++ch) {
            const double r = ref[static_cast<size_t>(ch) * pixels + p], o = ours[static_cast<size_t>(p) * dim + ch];
            e = std::isfinite(o) ? std::max(e, std::fabs(o - r) / std::max(1.0, std::fabs(r))) : INFINITY;
        }
    }
    return e;
}

class cpu_seg_head : public rfdetr::test::isa_test {};
RFDETR_FOR_EVERY_ISA(cpu_seg_head);

// Float32 against float64 through up to five 40-wide reductions and GELUs: a few 1e-6 relative; 3e-5 leaves
// room for the sums' order and fails any wrong tap, weight layout, index rule or epilogue by orders of magnitude.
constexpr double k_tol = 3e-5;

void check_head(int grid, int side, int threads) {
    SCOPED_TRACE("grid " + std::to_string(grid) + " -> side " + std::to_string(side) + ", " + std::to_string(threads) + " threads");
    const head_case c(grid, side, 40, 3, 72, 23);
    const reference r = run_reference(c);
    rfdetr::thread_pool pool(threads);
    cpu::seg_head       head(c.w, c.d, pool, cpu::precision::fp32);
    const int           P = side * side, D = c.d.dim;
    std::map<std::string, double> tapped;
    head.tap = [&](const std::string & name, const float * m) { tapped[name] = map_err(m, r.maps.at(name), P, D); };
    head.spatial(c.memory.data());
    ASSERT_EQ(tapped.size(), 1u + c.d.blocks);
    for (const auto & [name, e] : tapped) {
        std::printf("%-20s %.3g\n", name.c_str(), e);
        EXPECT_LE(e, k_tol) << name;
    }
    std::vector<float> s(static_cast<size_t>(P) * D);
    for (int p = 0; p < P; ++p) {
        for (int ch = 0; ch < D; ++ch) s[static_cast<size_t>(p) * D + ch] = head.spatial_at(p, ch);
    }
    EXPECT_LE(map_err(s.data(), r.maps.at("spatial_proj"), P, D), k_tol) << "spatial_proj";

    // A selection in no particular order, shorter than the query count, between guard rows.
    const std::vector<uint32_t> sel = {17, 3, 22, 0, 9, 10, 11, 5, 16, 1, 2, 4, 6, 7, 8, 12, 13, 14, 15, 19};
    const int                  k   = static_cast<int>(sel.size());
    const float                guard = 12345.0f;
    std::vector<float>         out(static_cast<size_t>(k + 2) * P, guard);
    head.masks(c.hs.data(), sel.data(), k, out.data() + P);
    for (int p = 0; p < P; ++p) {
        ASSERT_EQ(out[p], guard) << "written before row 0";
        ASSERT_EQ(out[static_cast<size_t>(k + 1) * P + p], guard) << "written past row k";
    }
    double eq = 0, em = 0;
    for (int i = 0; i < k; ++i) {
        const auto & f = r.qf[sel[i]];
        for (int ch = 0; ch < D; ++ch) eq = std::max(eq, std::fabs(head.query_features()[static_cast<size_t>(i) * D + ch] - f[ch]) / std::max(1.0, std::fabs(f[ch])));
        const auto & m = r.masks[sel[i]];
        for (int p = 0; p < P; ++p) {
            const double o = out[static_cast<size_t>(i + 1) * P + p];
            em = std::isfinite(o) ? std::max(em, std::fabs(o - m[p]) / std::max(1.0, std::fabs(m[p]))) : INFINITY;
        }
    }
    std::printf("%-20s %.3g\n%-20s %.3g\n", "query_features", eq, "masks", em);
    EXPECT_LE(eq, k_tol) << "query_features";
    EXPECT_LE(em, k_tol) << "masks";

    // The rows do not depend on which other rows are asked for: the full set's rows equal the selection's bit
    // for bit (each output row is its own dot products).
    std::vector<uint32_t> all(c.d.queries);
    for (int q = 0; q < c.d.queries; ++q) all[q] = q;
    std::vector<float> full(static_cast<size_t>(c.d.queries) * P);
    head.masks(c.hs.data(), all.data(), c.d.queries, full.data());
    for (int i = 0; i < k; ++i) {
        ASSERT_TRUE(std::equal(full.begin() + static_cast<size_t>(sel[i]) * P, full.begin() + static_cast<size_t>(sel[i] + 1) * P,
                               out.begin() + static_cast<size_t>(i + 1) * P))
            << "row " << i << " (query " << sel[i] << ") differs from the full set's";
    }

    // No rows asked for: nothing computed, nothing written.
    std::vector<float> none(P, guard);
    head.masks(c.hs.data(), sel.data(), 0, none.data());
    for (float v : none) ASSERT_EQ(v, guard);
}

TEST_P(cpu_seg_head, matches_the_float64_module_at_an_integer_scale) { check_head(5, 15, 2); }

// 7 -> 17: source coordinates that are not thirds, and a last panel of 17*17 % 32 = 1 pixel.
TEST_P(cpu_seg_head, matches_the_float64_module_at_a_fractional_scale) { check_head(7, 17, 3); }

// ---- the fixtures' own inputs ----

// max |ours - golden| over the golden's top-left crop [1, C, h, w] of a pixel-major map [side^2, C].
double crop_err(const float * ours, int side, int C, const rfdetr::test::golden_tensor & g) {
    const int h = static_cast<int>(g.shape[2]), w = static_cast<int>(g.shape[3]);
    double    e = 0;
    for (int ch = 0; ch < C; ++ch) {
        for (int y = 0; y < h; ++y) {
            for (int x = 0; x < w; ++x) {
                const double o = ours[(static_cast<size_t>(y) * side + x) * C + ch];
                e = std::isfinite(o) ? std::max(e, std::fabs(o - g.f32[(static_cast<size_t>(ch) * h + y) * w + x])) : INFINITY;
            }
        }
    }
    return e;
}

void check_fixture(const std::string & size) {
    const std::string fix = rfdetr::test::seg_fixtures_dir();
    const std::string dir = fix.empty() ? "" : fix + "/" + size;
    if (dir.empty() || !std::ifstream(dir + "/schema.json")) RFDETR_SKIP_OR_FAIL("no ../shared/fixtures/rfdetr-seg/" + size + " (set RFDETR_SEG_FIXTURES)");
    const auto g = rfdetr::test::read_golden(dir + "/case-1/golden.safetensors");
    // The head's weights: the generator's elements under seed 1 with each tensor's (A, S) from schema.json.
    std::map<std::string, std::vector<float>> t;
    {
        std::ifstream        f(dir + "/schema.json");
        const nlohmann::json schema = nlohmann::json::parse(f);
        for (const auto & e : schema["tensors"]) {
            const std::string key = e["key"];
            if (key.rfind("segmentation_head.", 0) != 0) continue;
            size_t n = 1;
            for (const auto & d : e["shape"]) n *= d.get<size_t>();
            auto & v = t[key.substr(18)];
            v.resize(n);
            rfdetr::synth_fill(v.data(), 1, key, n, e["A"].get<double>(), e["S"].get<double>());
        }
    }
    cpu::seg_head_dims d;
    d.grid    = static_cast<int>(g.at("projector.out").shape[2]);
    d.side    = static_cast<int>(g.at("pixel_values").shape[2]) / 4;
    d.dim     = static_cast<int>(g.at("projector.out").shape[1]);
    d.hidden  = static_cast<int>(t.at("query_features_block.layers.0.weight").size()) / d.dim;
    d.queries = static_cast<int>(g.at("decoder.hs_last").shape[1]);
    cpu::seg_head_weights w;
    for (d.blocks = 0; t.count("blocks." + std::to_string(d.blocks) + ".dwconv.weight"); ++d.blocks) {
        const std::string b = "blocks." + std::to_string(d.blocks) + ".";
        w.blocks.push_back({t.at(b + "dwconv.weight").data(), t.at(b + "dwconv.bias").data(), t.at(b + "norm.weight").data(),
                            t.at(b + "norm.bias").data(), t.at(b + "pwconv1.weight").data(), t.at(b + "pwconv1.bias").data()});
    }
    w.sp_w = t.at("spatial_features_proj.weight").data(), w.sp_b = t.at("spatial_features_proj.bias").data();
    w.qn_g = t.at("query_features_block.norm_in.weight").data(), w.qn_b = t.at("query_features_block.norm_in.bias").data();
    w.q1_w = t.at("query_features_block.layers.0.weight").data(), w.q1_b = t.at("query_features_block.layers.0.bias").data();
    w.q2_w = t.at("query_features_block.layers.2.weight").data(), w.q2_b = t.at("query_features_block.layers.2.bias").data();
    w.qp_w = t.at("query_features_proj.weight").data(), w.qp_b = t.at("query_features_proj.bias").data();
    w.bias = t.at("bias")[0];

    const int          G = d.grid, D = d.dim, M = d.side, P = M * M;
    std::vector<float> memory(static_cast<size_t>(G) * G * D);  // channels-first golden -> pixel-major
    for (int ch = 0; ch < D; ++ch) {
        for (int p = 0; p < G * G; ++p) memory[static_cast<size_t>(p) * D + ch] = g.at("projector.out").f32[static_cast<size_t>(ch) * G * G + p];
    }
    rfdetr::thread_pool pool(2);
    cpu::seg_head       head(w, d, pool, cpu::precision::fp32);
    std::map<std::string, double> err;
    head.tap = [&](const std::string & name, const float * m) { err["seg.crop." + name] = crop_err(m, M, D, g.at("seg.crop." + name)); };
    head.spatial(memory.data());
    std::vector<float> s(static_cast<size_t>(P) * D);
    for (int p = 0; p < P; ++p) {
        for (int ch = 0; ch < D; ++ch) s[static_cast<size_t>(p) * D + ch] = head.spatial_at(p, ch);
    }
    err["seg.crop.spatial_proj"] = crop_err(s.data(), M, D, g.at("seg.crop.spatial_proj"));
    ASSERT_EQ(err.size(), static_cast<size_t>(d.blocks) + 2);

    const bool full = g.count("pred_masks") != 0;
    std::vector<uint32_t> sel;
    if (full) {
        sel.resize(d.queries);
        std::iota(sel.begin(), sel.end(), 0);
    } else {
        for (int64_t q : g.at("pred_masks_sel_queries").i64) sel.push_back(static_cast<uint32_t>(q));
    }
    const auto &       want = g.at(full ? "pred_masks" : "pred_masks_sel").f32;
    std::vector<float> out(sel.size() * P);
    ASSERT_EQ(want.size(), out.size());
    head.masks(g.at("decoder.hs_last").f32.data(), sel.data(), static_cast<int>(sel.size()), out.data());
    double eq = 0, em = 0;
    for (size_t i = 0; i < sel.size(); ++i) {
        for (int ch = 0; ch < D; ++ch) {
            eq = std::max(eq, std::fabs(static_cast<double>(head.query_features()[i * D + ch]) - g.at("seg.query_features").f32[static_cast<size_t>(sel[i]) * D + ch]));
        }
    }
    for (size_t i = 0; i < out.size(); ++i) em = std::isfinite(out[i]) ? std::max(em, std::fabs(static_cast<double>(out[i]) - want[i])) : INFINITY;
    // The fixture README's tolerances: head intermediates 1e-4, mask logits 5e-4 absolute.
    for (const auto & [name, e] : err) {
        std::printf("seg-%s head %-26s max-abs %.3g (tol 1e-4)\n", size.c_str(), name.c_str(), e);
        EXPECT_LE(e, 1e-4) << name;
    }
    std::printf("seg-%s head %-26s max-abs %.3g (tol 1e-4)\n", size.c_str(), "seg.query_features", eq);
    std::printf("seg-%s head %-26s max-abs %.3g (tol 5e-4), %zu rows\n", size.c_str(), full ? "pred_masks" : "pred_masks_sel", em, sel.size());
    EXPECT_LE(eq, 1e-4) << "seg.query_features";
    EXPECT_LE(em, 5e-4) << "pred_masks";
}

TEST(cpu_seg_head_fixture, nano) { check_fixture("nano"); }
TEST(cpu_seg_head_fixture, small) { check_fixture("small"); }
TEST(cpu_seg_head_fixture, medium) { check_fixture("medium"); }
TEST(cpu_seg_head_fixture, large) { check_fixture("large"); }

}  // namespace
