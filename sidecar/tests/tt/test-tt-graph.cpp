// The whole TT device graph on the host implementation, end to end on the three golden fixtures:
// fp32 must reproduce logits/pred_boxes to <= 1e-3 (near-tie top-k swaps listed in detections.json compared
// with the reference's own selection injected); bf16-rounded gates the per-query detection-IoU of the device
// precision plan (with the reference top-k injected). Also: per-stage taps vs the shared goldens, trace vs eager, and the
// lifecycle closing the device on a failed start.
#include "engines/engine.h"
#include "engines/tt/tt-engine.h"
#include "engines/tt/tt-runner.h"
#include "detections.h"
#include "tt-test-support.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>

using namespace rfdetr;
using namespace rfdetr::tt;
using namespace rfdetr::tt_test;

namespace {

constexpr int    k_q          = 300;
constexpr double k_e2e_tol    = 1e-3;

struct fixture_case {
    std::string                      name;
    std::map<std::string, tt_golden_tensor> golden;  // repo golden: pixel_values, logits, pred_boxes, topk_indices
    nlohmann::json                   detections;
};

std::string missing_reason() {
    std::string w = weights_dir();
    if (w.empty() || !path_exists(w + "/model.safetensors")) {
        return "seed-1 checkpoint not found at '" + w + "' (run the synth_seed1 ctest fixture or set RFDETR_TT_TEST_WEIGHTS)";
    }
    if (!path_exists(repo_fixtures_dir() + "/case-1/golden.safetensors")) {
        return "repo fixtures missing at " + repo_fixtures_dir();
    }
    return "";
}

const checkpoint & seed1() {
    static std::unique_ptr<checkpoint> ck = checkpoint::open(weights_dir());
    return *ck;
}

const std::vector<fixture_case> & cases() {
    static std::vector<fixture_case> cs = [] {
        std::vector<fixture_case> v;
        for (int i = 1; i <= 3; ++i) {
            fixture_case c;
            c.name       = "case-" + std::to_string(i);
            c.golden     = tt_read_safetensors(repo_fixtures_dir() + "/" + c.name + "/golden.safetensors");
            c.detections = read_json(repo_fixtures_dir() + "/" + c.name + "/detections.json");
            v.push_back(std::move(c));
        }
        return v;
    }();
    return cs;
}

tt_runner & runner(const std::string & precision) {
    static std::map<std::string, std::unique_ptr<tt_runner>> rs;
    auto &                                                   r = rs[precision];
    if (!r) {
        auto t0 = std::chrono::steady_clock::now();
        r       = std::make_unique<tt_runner>(tt_ops_host_create(precision, 1), seed1(), false);
        std::printf("tt-host %s: upload + warm run + capture %.2f s\n", precision.c_str(),
                    std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    }
    return *r;
}

struct result {
    std::vector<float> logits, boxes, topk;
    double             ms = 0;
};

result run(tt_runner & r, const fixture_case & c) {
    result out;
    out.logits.resize((size_t)k_q * r.num_classes());
    out.boxes.resize((size_t)k_q * 4);
    auto t0 = std::chrono::steady_clock::now();
    r.forward(c.golden.at("pixel_values").f32.data(), out.logits.data(), out.boxes.data());
    out.ms   = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    out.topk = r.read_tap("two_stage.topk_indices");
    return out;
}

// Rank positions where our top-k differs from the reference; each must be one side of a listed near tie.
std::vector<int> topk_mismatches(const std::vector<float> & ours, const tt_golden_tensor & golden) {
    std::vector<int> at;
    for (int i = 0; i < k_q; ++i) {
        if ((int64_t)ours[i] != golden.i64[i]) {
            at.push_back(i);
        }
    }
    return at;
}

// Every differing rank one side of a near tie detections.json lists (tests/support/detections.h).
bool swaps_are_near_ties(const std::vector<float> & ours, const fixture_case & c) {
    return ::rfdetr::test::topk_swaps_are_near_ties(std::vector<int64_t>(ours.begin(), ours.end()),
                                                    c.golden.at("two_stage.topk_indices").i64, c.detections);
}

using ::rfdetr::test::detection_iou;
using ::rfdetr::test::postprocess;

}  // namespace

TEST(TtHostGraph, Fp32MatchesTheGoldensOnAllCasesAndTraceEqualsEager) {
    auto why = missing_reason();
    if (!why.empty()) {
        RFDETR_SKIP_OR_FAIL(why);
    }
    auto & r = runner("fp32");
    result last;
    for (const auto & c : cases()) {
        SCOPED_TRACE(c.name);
        result       res  = run(r, c);
        auto         mism = topk_mismatches(res.topk, c.golden.at("two_stage.topk_indices"));
        std::printf("%s fp32: forward %.0f ms, top-k differs from the reference at %zu ranks\n", c.name.c_str(), res.ms, mism.size());
        if (!mism.empty()) {
            ASSERT_TRUE(swaps_are_near_ties(res.topk, c)) << "top-k differs outside the listed near-tie pairs";
            // compare per query with the reference's own selection injected
            std::vector<int> gi(c.golden.at("two_stage.topk_indices").i64.begin(), c.golden.at("two_stage.topk_indices").i64.end());
            r.set_topk_override(gi);
            res = run(r, c);
            r.set_topk_override({});
        }
        const auto & gl = c.golden.at("logits").f32;
        const auto & gb = c.golden.at("pred_boxes").f32;
        ASSERT_EQ(res.logits.size(), gl.size());
        auto el = max_abs_diff(res.logits.data(), gl.data(), gl.size());
        auto eb = max_abs_diff(res.boxes.data(), gb.data(), gb.size());
        std::printf("%s fp32: logits max-abs %.3g, pred_boxes max-abs %.3g\n", c.name.c_str(), el.abs, eb.abs);
        EXPECT_TRUE(el.finite && eb.finite);
        EXPECT_LE(el.abs, k_e2e_tol) << "logits at " << el.at;
        EXPECT_LE(eb.abs, k_e2e_tol) << "pred_boxes at " << eb.at;
        // and the detections themselves: same set, same labels, at 0.5
        auto   W    = c.detections["image"]["width"].get<float>();
        auto   H    = c.detections["image"]["height"].get<float>();
        auto   ours = postprocess(res.logits, res.boxes, r.num_classes(), 0.5f, W, H);
        double di   = detection_iou(ours, c.detections["detections"]["0.5"]);
        std::printf("%s fp32: %zu detections (reference %zu), detection-IoU %.3f\n", c.name.c_str(), ours.size(),
                    c.detections["detections"]["0.5"].size(), di);
        EXPECT_EQ(ours.size(), c.detections["detections"]["0.5"].size());
        EXPECT_GT(di, 99.9);
        last = res;
    }

    // The trace replay computes exactly what an eager run of the same graph computes.
    tt_runner eager(tt_ops_host_create("fp32", 1), seed1(), true);
    EXPECT_TRUE(eager.eager());
    result e = run(eager, cases().back());
    EXPECT_EQ(e.logits, last.logits);
    EXPECT_EQ(e.boxes, last.boxes);
    eager.shutdown();
    EXPECT_EQ(eager.state(), TT_RUNNER_STATE_CLOSED);
    EXPECT_THROW(run(eager, cases().back()), error);
}

// The order-invariant top-k comparison itself (the fixtures' own selections never trigger it in fp32).
TEST(TtHostGraph, TopkSwapsAreAcceptedOnlyWithinListedNearTies) {
    if (!path_exists(repo_fixtures_dir() + "/case-1/golden.safetensors")) {
        RFDETR_SKIP_OR_FAIL("repo fixtures missing at " + repo_fixtures_dir());
    }
    const auto &       c  = cases()[0];
    const auto &       gi = c.golden.at("two_stage.topk_indices");
    std::vector<float> ours(gi.i64.begin(), gi.i64.end());
    EXPECT_TRUE(topk_mismatches(ours, gi).empty());
    const auto & pairs = c.detections["two_stage_topk"]["near_tie_pairs_top300"];
    ASSERT_FALSE(pairs.empty());
    int rank = pairs[0]["rank"].get<int>();
    std::swap(ours[rank], ours[rank + 1]);  // a listed near tie
    auto mism = topk_mismatches(ours, gi);
    EXPECT_EQ(mism, (std::vector<int>{rank, rank + 1}));
    EXPECT_TRUE(swaps_are_near_ties(ours, c));
    std::swap(ours[rank], ours[rank + 1]);
    std::swap(ours[0], ours[1]);  // ranks 0/1 are not a listed near tie
    EXPECT_FALSE(swaps_are_near_ties(ours, c));
}

// Per-stage checks against the big shared goldens (feature maps, projector, encoder logits, decoder).
TEST(TtHostGraph, Fp32StagesMatchTheSharedGoldens) {
    auto why = missing_reason();
    std::string shared = shared_fixtures_dir() + "/case-2/golden.safetensors";
    if (why.empty() && !path_exists(shared)) {
        why = "shared per-stage goldens not found at " + shared + " (set RFDETR_SHARED_FIXTURES)";
    }
    if (!why.empty()) {
        RFDETR_SKIP_OR_FAIL(why);
    }
    auto & r = runner("fp32");
    auto   g = tt_read_safetensors(shared);
    fixture_case c;
    c.golden = g;
    run(r, c);  // case-2
    struct stage {
        const char * name;
        int          C;  // channels-first goldens are transposed to channels-last
        double       tol;
    };
    const stage stages[] = {
        {"backbone.feature_map.0", 384, 5e-5}, {"backbone.feature_map.1", 384, 5e-5}, {"backbone.feature_map.2", 384, 5e-5},
        {"backbone.feature_map.3", 384, 5e-5}, {"projector.out", 256, 1e-4},          {"two_stage.enc_class_logits", 0, 1e-4},
        {"decoder.reference_points", 0, 2e-5}, {"decoder.query_pos", 0, 2e-5},        {"decoder.hs_last", 0, 3e-4},
    };
    for (const auto & s : stages) {
        auto         got = r.read_tap(s.name);
        const auto & ref = g.at(s.name).f32;
        auto         want = s.C ? to_channels_last(ref, s.C, 1600) : ref;
        ASSERT_EQ(got.size(), want.size()) << s.name;
        auto e = max_abs_diff(got.data(), want.data(), want.size());
        std::printf("case-2 fp32 %-28s max-abs %.3g (tol %.0e)\n", s.name, e.abs, s.tol);
        EXPECT_TRUE(e.finite) << s.name;
        EXPECT_LE(e.abs, s.tol) << s.name << " at " << e.at;
    }
}

// Where the bf16 error comes from: per-stage max-abs against the shared goldens (when present).
void print_bf16_stages(tt_runner & r, const std::string & case_name) {
    std::string path = shared_fixtures_dir() + "/" + case_name + "/golden.safetensors";
    if (!path_exists(path)) {
        return;
    }
    auto g = tt_read_safetensors(path);
    for (const char * name : {"backbone.feature_map.0", "backbone.feature_map.3", "projector.out", "two_stage.enc_class_logits",
                              "decoder.query_pos", "decoder.hs_last"}) {
        auto         got  = r.read_tap(name);
        const auto & ref  = g.at(name).f32;
        int          C    = std::string(name).rfind("backbone", 0) == 0 ? 384 : std::string(name) == "projector.out" ? 256 : 0;
        auto         want = C ? to_channels_last(ref, C, 1600) : ref;
        double       mx   = 0;
        for (float v : want) {
            mx = std::max(mx, (double)std::fabs(v));
        }
        auto e = max_abs_diff(got.data(), want.data(), want.size());
        std::printf("  %s bf16 stage %-28s max-abs %.3g (values up to %.3g)\n", case_name.c_str(), name, e.abs, mx);
    }
}

// Two numbers per case for the default ("device") precision plan: the graph with its own two-stage top-k, and
// with the reference's top-k injected, which isolates the rest of the plan from the selection (the synthetic
// checkpoint's top-300 scores are packed tighter than the plan's score error, so ranks reorder; README "Precision").
TEST(TtHostGraph, Bf16DetectionIouPrediction) {
    auto why = missing_reason();
    if (!why.empty()) {
        RFDETR_SKIP_OR_FAIL(why);
    }
    auto & r = runner("bf16");
    double mean[2] = {0, 0};
    for (int injected = 0; injected < 2; ++injected) {  // injected last: switching it on re-captures once
        for (const auto & c : cases()) {
            auto             W = c.detections["image"]["width"].get<float>();
            auto             H = c.detections["image"]["height"].get<float>();
            const auto &     ref_dets = c.detections["detections"]["0.5"];
            std::vector<int> gi(c.golden.at("two_stage.topk_indices").i64.begin(), c.golden.at("two_stage.topk_indices").i64.end());
            r.set_topk_override(injected ? gi : std::vector<int>());
            result res  = run(r, c);
            auto   ours = postprocess(res.logits, res.boxes, r.num_classes(), 0.5f, W, H);
            double di   = detection_iou(ours, ref_dets);
            auto   el   = max_abs_diff(res.logits.data(), c.golden.at("logits").f32.data(), res.logits.size());
            auto   eb   = max_abs_diff(res.boxes.data(), c.golden.at("pred_boxes").f32.data(), res.boxes.size());
            auto   mism = topk_mismatches(res.topk, c.golden.at("two_stage.topk_indices"));
            std::printf("%s bf16 (%s): forward %.0f ms, logits max-abs %.3g, boxes max-abs %.3g, top-k ranks differing %zu, "
                        "%zu detections (reference %zu), detection-IoU %.2f\n",
                        c.name.c_str(), injected ? "reference top-k injected" : "device top-k", res.ms, el.abs, eb.abs, mism.size(),
                        ours.size(), ref_dets.size(), di);
            if (injected) {
                EXPECT_EQ(mism.size(), 0u) << "the injected top-k was not used";
                print_bf16_stages(r, c.name);
            }
            EXPECT_TRUE(el.finite && eb.finite);
            EXPECT_GT(el.abs, 0.0) << "bf16 rounding had no effect";
            // With the device's own top-k the number is set by which near-tied patches the rounding reorders
            // (7-20 here, noise: sidecar/src/engines/tt/README.md, "Precision"), so only the per-query
            // comparison is gated. The default plan measures 83.65 / 80.75 / 80.97 on cases 1-3; below 78 the
            // host model loses more than the plan does; above 88 it rounds less than the plan says (fp32
            // activations, the act32 bound, reach 88.68).
            if (injected) {
                EXPECT_GE(di, 78.0) << c.name << ": the default plan's bf16 model lost more than measured";
                EXPECT_LE(di, 88.0) << c.name << ": the bf16 model rounds less than the default plan";
            }
            mean[injected] += di / 3.0;
        }
    }
    r.set_topk_override({});
    std::printf("bf16 detection-IoU (mean of 3 cases, threshold 0.5; device gate 98.5): %.2f with the device top-k, "
                "%.2f with the reference top-k injected\n",
                mean[0], mean[1]);
}

// The evidence behind the default plan, cheaply: with the reference's selection injected (so the comparison is
// per query), the default plan's logits and boxes are closer to the fp32 reference than the uniform bf16 plan's.
TEST(TtHostGraph, Bf16DefaultPlanLosesLessThanUniformBf16) {
    auto why = missing_reason();
    if (!why.empty()) {
        RFDETR_SKIP_OR_FAIL(why);
    }
    const auto &     c = cases()[1];
    std::vector<int> gi(c.golden.at("two_stage.topk_indices").i64.begin(), c.golden.at("two_stage.topk_indices").i64.end());
    auto rms = [](const std::vector<float> & a, const std::vector<float> & b) {
        double se = 0;
        for (size_t i = 0; i < a.size(); ++i) {
            se += ((double)a[i] - b[i]) * ((double)a[i] - b[i]);
        }
        return std::sqrt(se / (double)a.size());
    };
    tt_runner dev(tt_ops_host_create("bf16", 1), seed1(), true, tt_plan_named("device"));
    tt_runner uni(tt_ops_host_create("bf16", 1), seed1(), true, tt_plan_named("uniform"));
    dev.set_topk_override(gi);
    uni.set_topk_override(gi);
    result rd = run(dev, c), ru = run(uni, c);
    double ld = rms(rd.logits, c.golden.at("logits").f32), lu = rms(ru.logits, c.golden.at("logits").f32);
    double bd = rms(rd.boxes, c.golden.at("pred_boxes").f32), bu = rms(ru.boxes, c.golden.at("pred_boxes").f32);
    std::printf("%s reference top-k: logits RMS %.4g (device plan) vs %.4g (uniform bf16), boxes RMS %.4g vs %.4g\n",
                c.name.c_str(), ld, lu, bd, bu);
    EXPECT_GT(ld, 0.0) << "the device plan rounded nothing";
    EXPECT_LT(ld, lu);
    EXPECT_LT(bd, bu);
}

// ---- lifecycle: a failed start closes the device ----

namespace {

// Forwards to the host ops, failing at a chosen point, and records close().
class failing_ops : public tt_ops {
  public:
    failing_ops(int fail_upload, bool fail_capture, bool * closed)
        : in_(tt_ops_host_create("fp32", 0)), fail_upload_(fail_upload), fail_capture_(fail_capture), closed_(closed) {}
    std::string describe() const override { return "failing"; }
    void        set_math(const tt_math & m) override { in_->set_math(m); }
    tt_tensor   upload(const float * d, const tt_shape & s, tt_dtype t) override {
        if (++uploads_ == fail_upload_) {
            throw error("failing_ops: injected upload failure");
        }
        return in_->upload(d, s, t);
    }
    void write(const tt_tensor & a, const float * d) override { in_->write(a, d); }
    void read(const tt_tensor & a, float * d) override { in_->read(a, d); }
    tt_tensor linear(const tt_tensor & a, const tt_tensor & b, const tt_tensor & c, tt_act act) override { return in_->linear(a, b, c, act); }
    tt_tensor linear_addcmul(const tt_tensor & a, const tt_tensor & b, const tt_tensor & c, const tt_tensor & d, const tt_tensor & e) override {
        return in_->linear_addcmul(a, b, c, d, e);
    }
    tt_tensor matmul(const tt_tensor & a, const tt_tensor & b) override { return in_->matmul(a, b); }
    std::array<tt_tensor, 3> split_heads(const tt_tensor & a, int h) override { return in_->split_heads(a, h); }
    tt_tensor sdpa(const tt_tensor & q, const tt_tensor & k, const tt_tensor & v, float s) override { return in_->sdpa(q, k, v, s); }
    tt_tensor concat_heads(const tt_tensor & a) override { return in_->concat_heads(a); }
    tt_tensor layer_norm(const tt_tensor & a, const tt_tensor & w, const tt_tensor & b, float e) override { return in_->layer_norm(a, w, b, e); }
    tt_tensor gelu(const tt_tensor & a) override { return in_->gelu(a); }
    tt_tensor silu(const tt_tensor & a) override { return in_->silu(a); }
    tt_tensor relu(const tt_tensor & a) override { return in_->relu(a); }
    tt_tensor exp(const tt_tensor & a) override { return in_->exp(a); }
    tt_tensor sin(const tt_tensor & a) override { return in_->sin(a); }
    tt_tensor cos(const tt_tensor & a) override { return in_->cos(a); }
    tt_tensor softmax(const tt_tensor & a) override { return in_->softmax(a); }
    tt_tensor max(const tt_tensor & a) override { return in_->max(a); }
    tt_tensor add(const tt_tensor & a, const tt_tensor & b) override { return in_->add(a, b); }
    tt_tensor multiply(const tt_tensor & a, const tt_tensor & b) override { return in_->multiply(a, b); }
    tt_tensor where(const tt_tensor & m, const tt_tensor & a, const tt_tensor & b) override { return in_->where(m, a, b); }
    tt_tensor conv2d(const tt_tensor & a, const tt_tensor & w, int k, int p) override { return in_->conv2d(a, w, k, p); }
    tt_tensor upload_indices(const std::vector<int> & i) override { return in_->upload_indices(i); }
    tt_tensor upsample_bilinear(const tt_tensor & a, int s) override { return in_->upsample_bilinear(a, s); }
    tt_tensor conv2d_depthwise(const tt_tensor & a, const tt_tensor & w, int k, int p) override { return in_->conv2d_depthwise(a, w, k, p); }
    tt_tensor topk_indices(const tt_tensor & a, int k) override { return in_->topk_indices(a, k); }
    tt_tensor gather_rows(const tt_tensor & t, const tt_tensor & i) override { return in_->gather_rows(t, i); }
    tt_tensor deformable_attn(const tt_tensor & v, const tt_tensor & g, const tt_tensor & a) override { return in_->deformable_attn(v, g, a); }
    tt_tensor reshape(const tt_tensor & a, const tt_shape & s) override { return in_->reshape(a, s); }
    tt_tensor permute(const tt_tensor & a, const std::vector<int> & p) override { return in_->permute(a, p); }
    tt_tensor slice_last(const tt_tensor & a, int64_t b, int64_t e) override { return in_->slice_last(a, b, e); }
    tt_tensor concat_last(const std::vector<tt_tensor> & xs) override { return in_->concat_last(xs); }
    void      begin_trace_capture() override {
        if (fail_capture_) {
            throw error("failing_ops: injected capture failure");
        }
        in_->begin_trace_capture();
    }
    void end_trace_capture() override { in_->end_trace_capture(); }
    void execute_trace() override { in_->execute_trace(); }
    void release_trace() override { in_->release_trace(); }
    void synchronize() override { in_->synchronize(); }
    void close() override {
        *closed_ = true;
        in_->close();
    }

  private:
    std::unique_ptr<tt_ops> in_;
    int                     uploads_ = 0;
    int                     fail_upload_;
    bool                    fail_capture_;
    bool *                  closed_;
};

}  // namespace

TEST(TtRunnerLifecycle, FailedStartClosesTheDevice) {
    auto why = missing_reason();
    if (!why.empty()) {
        RFDETR_SKIP_OR_FAIL(why);
    }
    for (bool at_capture : {false, true}) {
        bool closed = false;
        auto ops    = std::make_unique<failing_ops>(at_capture ? -1 : 7, at_capture, &closed);
        try {
            tt_runner r(std::move(ops), seed1(), false);
            FAIL() << "the runner started despite an injected failure";
        } catch (const error & e) {
            EXPECT_NE(std::string(e.what()).find("injected"), std::string::npos) << e.what();
        }
        EXPECT_TRUE(closed) << (at_capture ? "failure at capture" : "failure at upload") << " left the device open";
    }
}

TEST(TtEngine, MeshShapeOtherThan1x1IsRefusedWithTheReason) {
    EXPECT_NO_THROW(tt_check_mesh_shape(nullptr));
    EXPECT_NO_THROW(tt_check_mesh_shape(""));
    EXPECT_NO_THROW(tt_check_mesh_shape("1x1"));
    try {
        tt_check_mesh_shape("2x4");
        FAIL() << "2x4 accepted";
    } catch (const error & e) {
        std::string m = e.what();
        EXPECT_NE(m.find("TT_MESH_SHAPE=2x4"), std::string::npos) << m;
        EXPECT_NE(m.find("expected 1x1"), std::string::npos) << m;
    }
}
