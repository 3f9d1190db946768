// The CPU engine against the reference's tensors: end to end on the repository's small goldens (a fresh
// clone runs these), and stage by stage on the large shared goldens (skipped with a reason when absent,
// failed under RFDETR_REQUIRE_ALL=1). One tolerance table; NaN/Inf checked before any difference.
#include "engines/cpu/bgemm.h"
#include "engines/cpu/cpu-model.h"
#include "golden-file.h"
#include "model/checkpoint.h"
#include "model/synth.h"
#include "skip.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <set>
#include <utility>

namespace {

constexpr int k_queries = 300;  // RF-DETR-Base's query count

using rfdetr::test::golden_tensor;
namespace cpu = rfdetr::cpu;

// The one tolerance table (max-abs). The end-to-end ceiling is 1e-3, the bound the tt-host fp32 graph is held to too (test-tt-graph.cpp); these are the aims of the
// fixture README, tightened where the engine measures far below them.
struct tolerance {
    const char * tensor;
    double       max_abs;
};
constexpr tolerance k_tolerances[] = {
    {"backbone.pos_embed_interp", 1e-6},
    {"backbone.embeddings", 1e-5},
    {"backbone.feature_map", 5e-5},
    {"projector.out", 1e-4},
    {"two_stage.enc_class_logits", 1e-4},
    {"two_stage.enc_coords", 2e-5},
    {"decoder.reference_points", 2e-5},
    {"decoder.query_pos", 5e-6},
    {"decoder.layer_outputs", 1e-4},
    {"decoder.hs_last", 1e-4},
    {"logits", 3e-4},
    {"pred_boxes", 2e-5},
};
constexpr double k_end_to_end_ceiling = 1e-3;

double tolerance_of(const std::string & tensor) {
    for (const auto & t : k_tolerances) {
        if (tensor.rfind(t.tensor, 0) == 0) return t.max_abs;
    }
    ADD_FAILURE() << "no tolerance for " << tensor;
    return 0.0;
}

// NaN/Inf first, then max-abs. Returns the max-abs (or NaN when a value is not finite).
double compare(const std::string & what, const float * got, const std::vector<float> & want, double tol) {
    for (size_t i = 0; i < want.size(); ++i) {
        if (!std::isfinite(got[i])) {
            ADD_FAILURE() << what << ": non-finite value " << got[i] << " at " << i;
            return NAN;
        }
    }
    double worst = 0.0;
    size_t at    = 0;
    for (size_t i = 0; i < want.size(); ++i) {
        const double d = std::fabs(static_cast<double>(got[i]) - want[i]);
        if (d > worst) worst = d, at = i;
    }
    EXPECT_LE(worst, tol) << what << ": max-abs " << worst << " at flat index " << at << " (engine " << got[at]
                          << ", reference " << want[at] << ")";
    std::printf("parity  %-34s max-abs %.3g  (tolerance %.0e)\n", what.c_str(), worst, tol);
    return worst;
}

// [C, H*W] reference layout -> pixel-major [H*W, C] with leading dimension ld, as the engine stores maps.
std::vector<float> chw_to_pixel_major(const std::vector<float> & chw, int c, int hw) {
    std::vector<float> out(chw.size());
    for (int ch = 0; ch < c; ++ch)
        for (int p = 0; p < hw; ++p) out[static_cast<size_t>(p) * c + ch] = chw[static_cast<size_t>(ch) * hw + p];
    return out;
}

class cpu_parity : public ::testing::TestWithParam<int> {
  protected:
    static void SetUpTestSuite() {
        try {
            ckpt_  = rfdetr::checkpoint::open(rfdetr::test::test_weights_dir());
            model_ = std::make_unique<cpu::model>(*ckpt_, rfdetr::physical_core_count());
        } catch (const std::exception & e) {
            load_error_ = e.what();
        }
    }
    static void TearDownTestSuite() {
        model_.reset();
        ckpt_.reset();
    }
    void SetUp() override {
        ASSERT_TRUE(model_) << "the seed-1 checkpoint did not load (" << load_error_
                            << "); ctest generates it with the synth_seed1 fixture, or set RFDETR_TEST_WEIGHTS";
    }
    static std::string case_dir(const std::string & root, int n) { return root + "/case-" + std::to_string(n); }

    static std::unique_ptr<rfdetr::checkpoint> ckpt_;
    static std::unique_ptr<cpu::model>         model_;
    static std::string                         load_error_;
};
std::unique_ptr<rfdetr::checkpoint> cpu_parity::ckpt_;
std::unique_ptr<cpu::model>         cpu_parity::model_;
std::string                         cpu_parity::load_error_;

TEST_P(cpu_parity, end_to_end_logits_and_boxes_match_the_golden) {
    const std::string dir = case_dir(rfdetr::test::repo_fixtures_dir(), GetParam());
    auto              g   = rfdetr::test::read_golden(dir + "/golden.safetensors");
    const int         nc  = model_->num_classes();
    ASSERT_EQ(g.at("logits").numel(), k_queries * nc);
    std::vector<float> logits(static_cast<size_t>(k_queries) * nc), boxes(k_queries * 4);
    model_->set_topk_override(nullptr);
    model_->forward(g.at("pixel_values").f32.data(), logits.data(), boxes.data());

    // The top-300 selection: identical, or differing only by swaps of listed near-tie neighbours.
    const auto & want_idx = g.at("two_stage.topk_indices").i64;
    std::ifstream dj(dir + "/detections.json");
    const auto    det = nlohmann::json::parse(dj);
    std::set<std::pair<int64_t, int64_t>> near_ties;
    for (const auto & p : det.at("two_stage_topk").at("near_tie_pairs_top300")) {
        const auto q = p.at("query_pair").get<std::vector<int64_t>>();
        near_ties.insert({q.at(0), q.at(1)});
        near_ties.insert({q.at(1), q.at(0)});
    }
    bool swapped = false;
    for (int i = 0; i < k_queries; ++i) {
        const int64_t got = model_->topk_indices()[i];
        if (got == want_idx[i]) continue;
        const bool listed = near_ties.count({got, want_idx[i]}) > 0;
        ASSERT_TRUE(listed) << "rank " << i << ": engine picked token " << got << ", the reference " << want_idx[i]
                            << ", and they are not a listed near-tie pair";
        swapped = true;
    }
    if (swapped) {
        // A near-tie swap re-pairs two query slots; compare the outputs of the reference's order instead.
        std::printf("parity  case-%d: top-k differs by listed near-tie swaps; comparing with the reference order\n",
                    GetParam());
        std::vector<int32_t> forced(want_idx.begin(), want_idx.end());
        model_->set_topk_override(forced.data());
        model_->forward(g.at("pixel_values").f32.data(), logits.data(), boxes.data());
        model_->set_topk_override(nullptr);
    }
    const std::string c = "case-" + std::to_string(GetParam()) + " ";
    compare(c + "logits (e2e ceiling)", logits.data(), g.at("logits").f32, k_end_to_end_ceiling);
    compare(c + "pred_boxes (e2e ceiling)", boxes.data(), g.at("pred_boxes").f32, k_end_to_end_ceiling);
    compare(c + "logits", logits.data(), g.at("logits").f32, tolerance_of("logits"));
    compare(c + "pred_boxes", boxes.data(), g.at("pred_boxes").f32, tolerance_of("pred_boxes"));
}

TEST_P(cpu_parity, every_stage_matches_the_shared_goldens_with_the_reference_topk) {
    const std::string root = rfdetr::test::shared_fixtures_dir();
    if (root.empty()) {
        RFDETR_SKIP_OR_FAIL("shared per-stage goldens absent: put them at ../shared/fixtures/rfdetr-synth (from the repo "
                            "root) or set RFDETR_SHARED_FIXTURES");
    }
    auto g = rfdetr::test::read_golden(case_dir(root, GetParam()) + "/golden.safetensors");
    const int nc = model_->num_classes();
    std::vector<float> logits(static_cast<size_t>(k_queries) * nc), boxes(k_queries * 4);
    const auto &       idx = g.at("two_stage.topk_indices").i64;
    std::vector<int32_t> forced(idx.begin(), idx.end());
    model_->set_topk_override(forced.data());
    model_->forward(g.at("pixel_values").f32.data(), logits.data(), boxes.data());
    model_->set_topk_override(nullptr);

    const std::string c = "case-" + std::to_string(GetParam()) + " ";
    auto check = [&](const std::string & key, const float * got, const std::vector<float> & want) {
        compare(c + key, got, want, tolerance_of(key));
    };
    // The two input-independent or large taps are stored for case-1 only (the rfdetr-synth README); a golden that
    // lacks them there fails instead of dropping their gates.
    const bool case1 = GetParam() == 1;
    EXPECT_EQ(g.count("backbone.pos_embed_interp") != 0, case1) << c << "backbone.pos_embed_interp: stored for case-1 only";
    EXPECT_EQ(g.count("backbone.embeddings") != 0, case1) << c << "backbone.embeddings: stored for case-1 only";
    if (case1 && g.count("backbone.pos_embed_interp")) {
        // The golden holds the raw interpolated grid; the engine's row 0 also carries the cls token.
        std::vector<float> pe(model_->pos_embed(), model_->pos_embed() + g.at("backbone.pos_embed_interp").numel());
        const float *      cls = ckpt_->get("backbone.0.encoder.encoder.embeddings.cls_token").data;
        for (int i = 0; i < model_->dims().vit_dim; ++i) pe[i] -= cls[i];
        check("backbone.pos_embed_interp", pe.data(), g.at("backbone.pos_embed_interp").f32);
    }
    if (case1 && g.count("backbone.embeddings")) check("backbone.embeddings", model_->embeddings(), g.at("backbone.embeddings").f32);
    for (int t = 0; t < 4; ++t) {
        const std::string key  = "backbone.feature_map." + std::to_string(t);
        const auto        want = chw_to_pixel_major(g.at(key).f32, model_->dims().vit_dim, model_->dims().pixels);
        std::vector<float> got(want.size());
        for (int p = 0; p < model_->dims().pixels; ++p)
            for (int ch = 0; ch < model_->dims().vit_dim; ++ch)
                got[static_cast<size_t>(p) * model_->dims().vit_dim + ch] = model_->taps()[static_cast<size_t>(p) * 4 * model_->dims().vit_dim + t * model_->dims().vit_dim + ch];
        check(key, got.data(), want);
    }
    check("projector.out", model_->memory(), chw_to_pixel_major(g.at("projector.out").f32, model_->dims().dim, model_->dims().pixels));
    check("two_stage.enc_class_logits", model_->enc_class_logits(), g.at("two_stage.enc_class_logits").f32);
    check("two_stage.enc_coords", model_->enc_coords(), g.at("two_stage.enc_coords").f32);
    check("decoder.reference_points", model_->reference_points(), g.at("decoder.reference_points").f32);
    check("decoder.query_pos", model_->query_pos(), g.at("decoder.query_pos").f32);
    check("decoder.layer_outputs", model_->layer_outputs(), g.at("decoder.layer_outputs").f32);
    check("decoder.hs_last", model_->hs(), g.at("decoder.hs_last").f32);
    check("logits", logits.data(), g.at("logits").f32);
    check("pred_boxes", boxes.data(), g.at("pred_boxes").f32);
}

TEST_F(cpu_parity, forward_is_deterministic_and_the_topk_override_is_honoured) {
    auto g = rfdetr::test::read_golden(case_dir(rfdetr::test::repo_fixtures_dir(), 1) + "/golden.safetensors");
    const size_t n = static_cast<size_t>(k_queries) * model_->num_classes();
    std::vector<float> l1(n), b1(k_queries * 4), l2(n), b2(k_queries * 4);
    model_->set_topk_override(nullptr);
    model_->forward(g.at("pixel_values").f32.data(), l1.data(), b1.data());
    model_->forward(g.at("pixel_values").f32.data(), l2.data(), b2.data());
    EXPECT_EQ(l1, l2);
    EXPECT_EQ(b1, b2);
    // Reversed order: slot i now pairs query_feat[i] with another proposal, so the outputs must change.
    std::vector<int32_t> rev(model_->topk_indices(), model_->topk_indices() + k_queries);
    std::reverse(rev.begin(), rev.end());
    model_->set_topk_override(rev.data());
    model_->forward(g.at("pixel_values").f32.data(), l2.data(), b2.data());
    model_->set_topk_override(nullptr);
    EXPECT_TRUE(std::equal(rev.begin(), rev.end(), model_->topk_indices()));
    EXPECT_NE(b1, b2);
}

TEST(cpu_parity_classes, a_fine_tuned_class_count_runs_and_shares_the_class_independent_path) {
    // rfdetr-synth fills element i of a tensor from (seed, key, i) alone, so a 7-class seed-1 checkpoint has
    // the first 7 rows of the COCO one's class heads and every other tensor equal. With the reference's
    // top-k injected, its boxes equal the golden boxes and its 7 logits the golden's first 7 columns.
    char tmpl[] = "/tmp/rfdetr-cpu-7class-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    const std::string dir = tmpl;
    rfdetr::synth_options so;
    so.seed        = 1;
    so.num_classes = 7;
    rfdetr::synth_write(dir, so);
    {
        auto       ckpt = rfdetr::checkpoint::open(dir);
        cpu::model m(*ckpt, rfdetr::physical_core_count());
        ASSERT_EQ(m.num_classes(), 7);
        auto g = rfdetr::test::read_golden(rfdetr::test::repo_fixtures_dir() + "/case-1/golden.safetensors");
        const auto & idx = g.at("two_stage.topk_indices").i64;
        std::vector<int32_t> forced(idx.begin(), idx.end());
        m.set_topk_override(forced.data());
        std::vector<float> logits(k_queries * 7), boxes(k_queries * 4), want(k_queries * 7);
        m.forward(g.at("pixel_values").f32.data(), logits.data(), boxes.data());
        for (int q = 0; q < k_queries; ++q)
            for (int c = 0; c < 7; ++c) want[q * 7 + c] = g.at("logits").f32[q * 91 + c];
        compare("7-class logits", logits.data(), want, tolerance_of("logits"));
        compare("7-class pred_boxes", boxes.data(), g.at("pred_boxes").f32, tolerance_of("pred_boxes"));
    }
    std::filesystem::remove_all(dir);
}

// Base's 16 windows split evenly over 1 thread (window by window) but not over 3 (one qkv GEMM over all tokens, then
// the heads); every output row's sums are the same either way, so the two forwards agree bit for bit.
void expect_window_blocks_exact(cpu::precision p) {
    auto ckpt = rfdetr::checkpoint::open(rfdetr::test::test_weights_dir());
    auto g    = rfdetr::test::read_golden(rfdetr::test::repo_fixtures_dir() + "/case-1/golden.safetensors");
    cpu::model fused(*ckpt, 1, p), whole(*ckpt, 3, p);
    ASSERT_TRUE(fused.windows_fused());
    ASSERT_FALSE(whole.windows_fused());
    const size_t       n = static_cast<size_t>(k_queries) * fused.num_classes();
    std::vector<float> l1(n), b1(k_queries * 4), l3(n), b3(k_queries * 4);
    fused.forward(g.at("pixel_values").f32.data(), l1.data(), b1.data());
    whole.forward(g.at("pixel_values").f32.data(), l3.data(), b3.data());
    const auto & d    = fused.dims();
    const size_t taps = static_cast<size_t>(d.pixels) * 4 * d.vit_dim;
    EXPECT_TRUE(std::equal(fused.taps(), fused.taps() + taps, whole.taps())) << "the ViT's taps differ, " << cpu::to_string(p);
    EXPECT_TRUE(l1 == l3) << "the logits differ, " << cpu::to_string(p);
    EXPECT_TRUE(b1 == b3) << "the boxes differ, " << cpu::to_string(p);
}

TEST(cpu_parity_threads, window_blocks_run_window_by_window_give_the_bits_of_one_gemm_over_all_tokens) {
    // fp32, and int8 (its own attention where the CPU runs it).
    for (cpu::precision p : {cpu::precision::fp32, cpu::precision::int8}) expect_window_blocks_exact(p);
}

TEST(cpu_parity_threads, bf16_window_blocks_run_window_by_window_give_the_bits_of_one_gemm_over_all_tokens) {
    // bf16: q, k, v as bf16 rows where the bf16 attention runs (AMX, AVX512-BF16 on AMD), fp32 rows elsewhere.
    std::string missing;
    if (!cpu::bf16_supported(missing)) RFDETR_SKIP_OR_FAIL("this CPU has no bf16 kernel: " + missing);
    expect_window_blocks_exact(cpu::precision::bf16);
}

INSTANTIATE_TEST_SUITE_P(fixture_cases, cpu_parity, ::testing::Values(1, 2, 3),
                         [](const ::testing::TestParamInfo<int> & i) { return "case_" + std::to_string(i.param); });

}  // namespace
