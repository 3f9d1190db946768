// rfdetr-tt-opcheck: every op of the TT vocabulary (tt-ops.h) on seeded random inputs, through one
// implementation, against the host fp32 implementation (after ggml's test-backend-ops). Per op: the output must
// be finite (NaN/Inf first), then its PCC and max-abs error against the reference must meet the tolerance
// table below. An op the implementation throws on is NOT_SUPPORTED, which is not a pass.
//
//   rfdetr-tt-opcheck [--impl host-bf16|ttnn] [--seed N] [--device-id N] [--op NAME]
//
// On this machine it runs host(bf16) — the device numerics the precision plan predicts — against host(fp32)
// (ctest tt.opcheck); on a card, `--impl ttnn` is the first thing to run (SERVING.md). Exit 0 when every op
// passes, 1 otherwise, 2 on a usage error.
//
// Inputs are drawn as bf16-representable values, so a data-movement op must be exact and an arithmetic op's
// error is its own, not the upload's.
#include "engines/engine.h"
#include "engines/tt/tt-ops.h"

#ifdef RFDETR_WITH_TTNN
#include "engines/tt/tt-ops-ttnn.h"
#endif

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <random>
#include <string>
#include <vector>

namespace {

using namespace rfdetr;
using namespace rfdetr::tt;

// One op's run: builds its inputs from the seed (identically for both implementations), issues the op,
// returns the output read back.
using op_run = std::function<std::vector<float>(tt_ops & ops, uint64_t seed)>;

struct op_case {
    const char * name;
    double       min_pcc;  // PCC(out, ref) >= this
    double       max_abs;  // max |out - ref| <= this
    op_run       run;
};

std::vector<float> randn(std::mt19937_64 & g, int64_t n, float scale = 1.0f, float offset = 0.0f) {
    std::normal_distribution<float> d(0.0f, 1.0f);
    std::vector<float>              v((size_t)n);
    for (float & x : v) {
        x = tt_round_bf16(offset + scale * d(g));
    }
    return v;
}

std::vector<float> uniform(std::mt19937_64 & g, int64_t n, float lo, float hi) {
    std::uniform_real_distribution<float> d(lo, hi);
    std::vector<float>                    v((size_t)n);
    for (float & x : v) {
        x = tt_round_bf16(d(g));
    }
    return v;
}

tt_tensor up(tt_ops & ops, const std::vector<float> & v, const tt_shape & s, tt_dtype dt = TT_DTYPE_BF16) {
    return ops.upload(v.data(), s, dt);
}

std::vector<float> get(tt_ops & ops, const tt_tensor & t) {
    std::vector<float> v((size_t)tt_numel(t->shape));
    ops.read(t, v.data());
    return v;
}

using unary_op = tt_tensor (tt_ops::*)(const tt_tensor &);
op_run unary(unary_op f, float scale, float offset = 0.0f) {
    return [=](tt_ops & ops, uint64_t seed) {
        std::mt19937_64 g(seed);
        return get(ops, (ops.*f)(up(ops, randn(g, 3 * 37 * 61, scale, offset), {3, 37, 61})));
    };
}

// The tolerance table: max-abs bounds about 4x what host(bf16) vs host(fp32) measures at seed 1 (the printed
// max_abs column; exp's bound is large because its outputs reach ~50, where one bf16 step is 0.25), PCC 0.9999.
// Data movement, selection, relu and max are exact. On a card these bounds are the precision model's: an op
// outside them departs from what the host study predicted for the device.
std::vector<op_case> cases() {
    std::vector<op_case> c;
    c.push_back({"linear", 0.9999, 0.05, [](tt_ops & ops, uint64_t seed) {
        std::mt19937_64 g(seed);
        return get(ops, ops.linear(up(ops, randn(g, 37 * 96), {1, 37, 96}), up(ops, randn(g, 96 * 53, 0.1f), {96, 53}),
                                   up(ops, randn(g, 53), {53}), TT_ACT_NONE));
    }});
    c.push_back({"linear+relu", 0.9999, 0.05, [](tt_ops & ops, uint64_t seed) {
        std::mt19937_64 g(seed);
        return get(ops, ops.linear(up(ops, randn(g, 37 * 96), {1, 37, 96}), up(ops, randn(g, 96 * 53, 0.1f), {96, 53}),
                                   up(ops, randn(g, 53), {53}), TT_ACT_RELU));
    }});
    c.push_back({"linear_addcmul", 0.9999, 0.06, [](tt_ops & ops, uint64_t seed) {
        std::mt19937_64 g(seed);
        return get(ops, ops.linear_addcmul(up(ops, randn(g, 37 * 96), {1, 37, 96}), up(ops, randn(g, 96 * 53, 0.1f), {96, 53}),
                                           up(ops, randn(g, 53), {53}), up(ops, randn(g, 37 * 53), {1, 37, 53}),
                                           up(ops, randn(g, 53, 0.5f), {53})));
    }});
    c.push_back({"matmul", 0.9999, 0.03, [](tt_ops & ops, uint64_t seed) {
        std::mt19937_64 g(seed);
        return get(ops, ops.matmul(up(ops, randn(g, 41 * 70), {41, 70}), up(ops, randn(g, 70 * 29, 0.1f), {70, 29})));
    }});
    c.push_back({"split_heads+sdpa+concat_heads", 0.9999, 0.02, [](tt_ops & ops, uint64_t seed) {
        std::mt19937_64 g(seed);
        const int B = 2, S = 29, H = 3, D = 16;
        auto      hv = ops.split_heads(up(ops, randn(g, B * S * 3 * H * D), {B, S, 3 * H * D}), H);
        return get(ops, ops.concat_heads(ops.sdpa(hv[0], hv[1], hv[2], 1.0f / std::sqrt((float)D))));
    }});
    c.push_back({"split_heads", 1.0, 0.0, [](tt_ops & ops, uint64_t seed) {
        std::mt19937_64 g(seed);
        auto            hv = ops.split_heads(up(ops, randn(g, 2 * 29 * 3 * 3 * 16), {2, 29, 3 * 3 * 16}), 3);
        std::vector<float> out;
        for (const auto & t : hv) {
            auto v = get(ops, t);
            out.insert(out.end(), v.begin(), v.end());
        }
        return out;
    }});
    c.push_back({"layer_norm", 0.9999, 0.03, [](tt_ops & ops, uint64_t seed) {
        std::mt19937_64 g(seed);
        return get(ops, ops.layer_norm(up(ops, randn(g, 37 * 96, 2.0f, 0.5f), {1, 37, 96}), up(ops, randn(g, 96, 0.2f, 1.0f), {96}),
                                       up(ops, randn(g, 96, 0.1f), {96}), 1e-6f));
    }});
    c.push_back({"gelu", 0.9999, 0.03, unary(&tt_ops::gelu, 2.0f)});
    c.push_back({"silu", 0.9999, 0.06, unary(&tt_ops::silu, 2.0f)});
    c.push_back({"relu", 1.0, 0.0, unary(&tt_ops::relu, 2.0f)});
    c.push_back({"exp", 0.9999, 0.5, unary(&tt_ops::exp, 1.0f)});
    c.push_back({"sin", 0.9999, 0.008, unary(&tt_ops::sin, 2.0f)});
    c.push_back({"cos", 0.9999, 0.008, unary(&tt_ops::cos, 2.0f)});
    c.push_back({"softmax", 0.9999, 0.008, unary(&tt_ops::softmax, 2.0f)});
    c.push_back({"max", 1.0, 0.0, unary(&tt_ops::max, 2.0f)});
    c.push_back({"add", 0.9999, 0.06, [](tt_ops & ops, uint64_t seed) {
        std::mt19937_64 g(seed);
        return get(ops, ops.add(up(ops, randn(g, 3 * 37 * 61), {3, 37, 61}), up(ops, randn(g, 61), {1, 1, 61})));
    }});
    c.push_back({"multiply", 0.9999, 0.06, [](tt_ops & ops, uint64_t seed) {
        std::mt19937_64 g(seed);
        return get(ops, ops.multiply(up(ops, randn(g, 3 * 37 * 61), {3, 37, 61}), up(ops, randn(g, 37), {1, 37, 1})));
    }});
    c.push_back({"where", 1.0, 0.0, [](tt_ops & ops, uint64_t seed) {
        std::mt19937_64    g(seed);
        std::vector<float> mask = uniform(g, 37 * 61, 0.0f, 1.0f);
        for (float & m : mask) {
            m = m > 0.5f ? 1.0f : 0.0f;
        }
        return get(ops, ops.where(up(ops, mask, {37, 61}), up(ops, randn(g, 37 * 61), {37, 61}), up(ops, randn(g, 37 * 61), {37, 61})));
    }});
    c.push_back({"conv2d", 0.9999, 0.06, [](tt_ops & ops, uint64_t seed) {
        std::mt19937_64 g(seed);
        return get(ops, ops.conv2d(up(ops, randn(g, 13 * 11 * 24), {1, 13, 11, 24}), up(ops, randn(g, 19 * 24 * 9, 0.1f), {19, 24, 3, 3}), 3, 1));
    }});
    c.push_back({"conv2d_depthwise", 0.9999, 0.03, [](tt_ops & ops, uint64_t seed) {
        std::mt19937_64 g(seed);
        return get(ops, ops.conv2d_depthwise(up(ops, randn(g, 13 * 11 * 40), {1, 13, 11, 40}), up(ops, randn(g, 40 * 9, 0.3f), {40, 1, 3, 3}), 3, 1));
    }});
    c.push_back({"upsample_bilinear", 0.9999, 0.03, [](tt_ops & ops, uint64_t seed) {
        std::mt19937_64 g(seed);
        return get(ops, ops.upsample_bilinear(up(ops, randn(g, 7 * 9 * 40), {1, 7, 9, 40}), 3));
    }});
    // Scores an integer apart (exact in bf16): the ranking is unambiguous, so indices must match exactly.
    auto topk = [](tt_dtype dt) {
        return [dt](tt_ops & ops, uint64_t seed) {
            std::mt19937_64    g(seed);
            std::vector<float> s(200);
            for (int i = 0; i < 200; ++i) {
                s[(size_t)i] = (float)i - 100.0f;
            }
            std::shuffle(s.begin(), s.end(), g);
            return get(ops, ops.topk_indices(up(ops, s, {1, 200}, dt), 37));
        };
    };
    c.push_back({"topk_indices (bf16 scores)", 1.0, 0.0, topk(TT_DTYPE_BF16)});
    c.push_back({"topk_indices (fp32 scores)", 1.0, 0.0, topk(TT_DTYPE_FP32)});
    c.push_back({"gather_rows (topk indices)", 1.0, 0.0, [](tt_ops & ops, uint64_t seed) {
        std::mt19937_64    g(seed);
        std::vector<float> s(120);
        for (int i = 0; i < 120; ++i) {
            s[(size_t)i] = (float)i;
        }
        std::shuffle(s.begin(), s.end(), g);
        auto idx = ops.topk_indices(up(ops, s, {1, 120}), 17);
        return get(ops, ops.gather_rows(up(ops, randn(g, 120 * 40), {120, 40}), idx));
    }});
    c.push_back({"gather_rows (uploaded indices)", 1.0, 0.0, [](tt_ops & ops, uint64_t seed) {
        std::mt19937_64 g(seed);
        auto            idx = ops.upload_indices({5, 0, 119, 5, 63});
        return get(ops, ops.gather_rows(up(ops, randn(g, 120 * 40), {120, 40}), idx));
    }});
    c.push_back({"deformable_attn", 0.9999, 0.016, [](tt_ops & ops, uint64_t seed) {
        std::mt19937_64 g(seed);
        const int       M = 2, H = 9, W = 11, D = 32, Q = 23, P = 4;
        return get(ops, ops.deformable_attn(up(ops, randn(g, M * H * W * D), {M, H, W, D}),
                                            up(ops, uniform(g, M * Q * P * 2, -1.1f, 1.1f), {M, Q * P, 1, 2}),
                                            up(ops, uniform(g, M * Q * P, 0.0f, 0.5f), {M, Q, P})));
    }});
    c.push_back({"reshape", 1.0, 0.0, [](tt_ops & ops, uint64_t seed) {
        std::mt19937_64 g(seed);
        return get(ops, ops.reshape(up(ops, randn(g, 6 * 35 * 64), {6, 35, 64}), {3, 70, 64}));
    }});
    c.push_back({"permute", 1.0, 0.0, [](tt_ops & ops, uint64_t seed) {
        std::mt19937_64 g(seed);
        return get(ops, ops.permute(up(ops, randn(g, 2 * 5 * 7 * 32), {2, 5, 7, 32}), {0, 2, 1, 3}));
    }});
    c.push_back({"slice_last", 1.0, 0.0, [](tt_ops & ops, uint64_t seed) {
        std::mt19937_64 g(seed);
        return get(ops, ops.slice_last(up(ops, randn(g, 37 * 96), {1, 37, 96}), 32, 77));
    }});
    c.push_back({"concat_last", 1.0, 0.0, [](tt_ops & ops, uint64_t seed) {
        std::mt19937_64 g(seed);
        return get(ops, ops.concat_last({up(ops, randn(g, 37 * 32), {1, 37, 32}), up(ops, randn(g, 37 * 64), {1, 37, 64})}));
    }});
    c.push_back({"write+read", 1.0, 0.0, [](tt_ops & ops, uint64_t seed) {
        std::mt19937_64 g(seed);
        auto            t = up(ops, randn(g, 37 * 64), {37, 64}, TT_DTYPE_FP32);
        auto            v = randn(g, 37 * 64);
        ops.write(t, v.data());
        return get(ops, t);
    }});
    // The trace: ops captured once replay on whatever the input holds now.
    c.push_back({"trace replay", 0.9999, 0.06, [](tt_ops & ops, uint64_t seed) {
        std::mt19937_64 g(seed);
        auto            x = up(ops, randn(g, 37 * 64), {37, 64}, TT_DTYPE_FP32);
        auto            w = up(ops, randn(g, 64 * 32, 0.1f), {64, 32});
        ops.begin_trace_capture();
        auto y = ops.gelu(ops.matmul(x, w));
        ops.end_trace_capture();
        auto v = randn(g, 37 * 64);
        ops.write(x, v.data());
        ops.execute_trace();
        ops.synchronize();
        auto out = get(ops, y);
        ops.release_trace();
        return out;
    }});
    return c;
}

struct result {
    std::string status;  // PASS | FAIL | NOT_SUPPORTED
    std::string why;
    double      pcc = 0, max_abs = 0;
};

result compare(const op_case & oc, const std::vector<float> & out, const std::vector<float> & ref) {
    result r;
    if (out.size() != ref.size()) {
        return {"FAIL", "output has " + std::to_string(out.size()) + " values, the reference " + std::to_string(ref.size())};
    }
    for (size_t i = 0; i < out.size(); ++i) {
        if (!std::isfinite(out[i])) {
            return {"FAIL", "non-finite output at " + std::to_string(i) + " (" + std::to_string(out[i]) + ")"};
        }
        if (!std::isfinite(ref[i])) {
            return {"FAIL", "the fp32 reference is non-finite at " + std::to_string(i) + ": the case is broken"};
        }
    }
    double ma = 0, mb = 0;
    for (size_t i = 0; i < out.size(); ++i) {
        ma += out[i];
        mb += ref[i];
        r.max_abs = std::max(r.max_abs, (double)std::fabs(out[i] - ref[i]));
    }
    ma /= (double)out.size();
    mb /= (double)out.size();
    double sab = 0, saa = 0, sbb = 0;
    for (size_t i = 0; i < out.size(); ++i) {
        sab += (out[i] - ma) * (ref[i] - mb);
        saa += (out[i] - ma) * (out[i] - ma);
        sbb += (ref[i] - mb) * (ref[i] - mb);
    }
    r.pcc    = (saa == 0 || sbb == 0) ? (r.max_abs == 0 ? 1.0 : 0.0) : sab / std::sqrt(saa * sbb);
    r.status = r.pcc >= oc.min_pcc && r.max_abs <= oc.max_abs ? "PASS" : "FAIL";
    if (r.status == "FAIL") {
        r.why = "outside the tolerance";
    }
    return r;
}

const char * k_usage = "usage: rfdetr-tt-opcheck [--impl host-bf16|ttnn] [--seed N] [--device-id N] [--op NAME]\n";

int usage(const std::string & msg) {
    std::fprintf(stderr, "rfdetr-tt-opcheck: %s\n%s", msg.c_str(), k_usage);
    return 2;
}

}  // namespace

int main(int argc, char ** argv) {
    std::string impl = "host-bf16", only;
    uint64_t    seed      = 1;
    int         device_id = 0;
    for (int i = 1; i < argc; ++i) {
        std::string a = argv[i];
        if (a == "--help" || a == "-h") {
            std::printf("rfdetr-tt-opcheck: every TT vocabulary op through an implementation against host fp32\n%s", k_usage);
            return 0;
        }
        if (i + 1 >= argc) {
            return usage("missing value for " + a);
        }
        std::string v = argv[++i];
        if (a == "--impl") {
            impl = v;
        } else if (a == "--seed") {
            seed = std::strtoull(v.c_str(), nullptr, 0);
        } else if (a == "--device-id") {
            device_id = std::atoi(v.c_str());
        } else if (a == "--op") {
            only = v;
        } else {
            return usage("unknown option " + a);
        }
    }
    std::unique_ptr<tt_ops> ref, dut;
    try {
        ref = tt_ops_host_create("fp32", 1);
        if (impl == "host-bf16") {
            dut = tt_ops_host_create("bf16", 1);
        } else if (impl == "ttnn") {
#ifdef RFDETR_WITH_TTNN
            dut = tt_ops_ttnn_open(device_id);
#else
            (void)device_id;
            std::fprintf(stderr, "rfdetr-tt-opcheck: --impl ttnn needs a build with -DRFDETR_WITH_TTNN=ON\n");
            return 2;
#endif
        } else {
            return usage("unknown --impl " + impl + " (expected host-bf16 or ttnn)");
        }
    } catch (const std::exception & e) {
        std::fprintf(stderr, "rfdetr-tt-opcheck: could not create the implementation: %s\n", e.what());
        return 1;
    }
    dut->set_math(tt_math{});  // the device default: HiFi4, fp32 accumulation, bf16 outputs

    std::printf("%-31s %-13s %10s %10s   %s\n", "op", "status", "pcc", "max_abs", "tolerance (pcc >=, max_abs <=)");
    int pass = 0, total = 0;
    for (const op_case & oc : cases()) {
        if (!only.empty() && only != oc.name) {
            continue;
        }
        ++total;
        std::vector<float> want = oc.run(*ref, seed);
        result             r;
        try {
            r = compare(oc, oc.run(*dut, seed), want);
        } catch (const std::exception & e) {
            r = {"NOT_SUPPORTED", e.what()};
        }
        pass += r.status == "PASS";
        std::printf("%-31s %-13s %10.6f %10.3g   %.4f, %.3g%s%s\n", oc.name, r.status.c_str(), r.pcc, r.max_abs, oc.min_pcc,
                    oc.max_abs, r.why.empty() ? "" : "  ", r.why.c_str());
    }
    if (total == 0) {
        return usage("no op named '" + only + "'");
    }
    std::printf("rfdetr-tt-opcheck: %d/%d ops pass (%s vs host-fp32, seed %llu)%s\n", pass, total, impl.c_str(),
                (unsigned long long)seed, pass == total ? "" : "; NOT_SUPPORTED and FAIL are failures");
    return pass == total ? 0 : 1;
}
