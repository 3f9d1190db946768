// The CPU engine on the RF-DETR Seg sizes (Nano, Small, Medium, Large) against ../shared/fixtures/rfdetr-seg
// case-1, sized from the checkpoint (patch 12, 1 or 2x2 windows, 100/200 queries, 4/5 decoder layers): every
// stored stage at the detection family's tolerances; the top-k (swaps only within listed near ties, then the
// reference's selection injected); the mask head's intermediates (top-left 8x8 crops) and query features at
// 1e-4; the mask logits of every stored plane at 5e-4 absolute (the fixture README's tolerances), computed for
// exactly the stored queries; and the product's per-query-max detections at 0.5 and 0.3 equal to the fixture's
// contract list. Then SegNano through the engine interface: the request's selection picks the mask rows.
#include "engines/cpu/cpu-model.h"
#include "engines/engine.h"
#include "engines/registry.h"
#include "detections.h"
#include "family-case.h"
#include "model/checkpoint.h"
#include "skip.h"

#include <gtest/gtest.h>

#include <sys/stat.h>

#include <cmath>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <regex>
#include <numeric>
#include <set>

namespace {

namespace cpu = rfdetr::cpu;
using rfdetr::test::family_case;
using rfdetr::test::golden_tensor;

constexpr double k_tol_head  = 1e-4;  // spatial intermediates and query features (fp64 floor <= 2.1e-5)
constexpr double k_tol_masks = 5e-4;  // mask logits reach +-30; fp64 floor 1.1e-4

bool exists(const std::string & p) {
    struct stat st;
    return ::stat(p.c_str(), &st) == 0;
}

// The golden keys each size does not store (its README's "Not stored" and storage rules); any other missing
// key fails the test, so a gate never vanishes with its golden key.
const std::set<std::string> & not_stored(const std::string & size) {
    static const std::map<std::string, std::set<std::string>> k = {
        {"nano", {"decoder.layer_outputs"}},
        {"small", {}},
        {"medium", {"decoder.layer_outputs", "decoder.query_pos", "two_stage.enc_class_logits"}},
        {"large", {"decoder.layer_outputs", "two_stage.enc_class_logits"}},
    };
    return k.at(size);
}

bool gate(const family_case & c, const std::string & size, const std::string & key) {
    const bool stored = c.golden.count(key) != 0, listed = not_stored(size).count(key) != 0;
    EXPECT_NE(stored, listed) << size << ": golden " << (stored ? "stores " : "lacks ") << key
                              << (stored ? ", listed as not stored" : ", not listed as not stored");
    return stored;
}

double max_abs(const float * got, const std::vector<float> & want) {
    double e = 0;
    for (size_t i = 0; i < want.size(); ++i) {
        e = std::isfinite(got[i]) ? std::max(e, std::fabs((double)got[i] - want[i])) : INFINITY;
    }
    return e;
}

void report(const std::string & size, const std::string & what, double e, double tol) {
    std::printf("seg-%s cpu %-28s max-abs %.3g (tol %.0e)\n", size.c_str(), what.c_str(), e, tol);
    EXPECT_LE(e, tol) << what;
}

void run_size(const std::string & size) {
    const std::string variant = "seg-" + size;
    const std::string fix     = rfdetr::test::seg_fixtures_dir();
    if (fix.empty()) RFDETR_SKIP_OR_FAIL("no ../shared/fixtures/rfdetr-seg (set RFDETR_SEG_FIXTURES)");
    const std::string weights = rfdetr::test::family_weights_dir(variant);
    if (!exists(weights + "/model.safetensors")) RFDETR_SKIP_OR_FAIL("no " + weights + " (run the synth_family ctest fixture)");
    family_case c;
    c.variant = variant;
    c.weights = weights;
    c.golden  = rfdetr::test::read_golden(fix + "/" + size + "/case-1/golden.safetensors");
    {
        // Python's json writes an unbounded margin as Infinity, which JSON lacks: read it as null.
        std::ifstream     f(fix + "/" + size + "/case-1/detections.json");
        const std::string text((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
        c.detections = nlohmann::json::parse(std::regex_replace(text, std::regex(R"(-?\bInfinity\b|\bNaN\b)"), "null"));
    }
    auto               ck = rfdetr::checkpoint::open(c.weights);
    const auto &       a  = ck->variant().arch;
    cpu::model         m(*ck, 0);
    const auto         tol = rfdetr::test::tolerance{};
    const int          G = a.grid(), P = G * G, C = m.num_classes(), Q = m.dims().queries, M = m.dims().mask_side;
    ASSERT_TRUE(m.segmentation());
    ASSERT_EQ(Q, (int)c.golden.at("logits").shape[1]);
    ASSERT_EQ(M * 4, a.resolution);
    const float * px = c.golden.at("pixel_values").f32.data();

    std::vector<float> logits((size_t)Q * C), boxes((size_t)Q * 4);
    m.forward(px, logits.data(), boxes.data());
    const int W = a.vit_hidden;
    for (int i = 0; i < 4; ++i) {
        const std::string full = "backbone.feature_map." + std::to_string(i), crop = "backbone.feature_map_crop." + std::to_string(i);
        ASSERT_TRUE(c.golden.count(full) || c.golden.count(crop)) << full;
        std::vector<float> map((size_t)P * W);
        for (int p = 0; p < P; ++p) {
            std::copy(m.taps() + (size_t)p * 4 * W + i * W, m.taps() + (size_t)p * 4 * W + (i + 1) * W, map.begin() + (size_t)p * W);
        }
        report(size, full, rfdetr::test::crop_max_abs(map, G, W, c.golden.count(full) ? c.golden.at(full) : c.golden.at(crop)),
               tol.feature_map);
    }
    const std::vector<float> memory(m.memory(), m.memory() + (size_t)P * a.d_model);
    report(size, "projector.out", rfdetr::test::crop_max_abs(memory, G, a.d_model, c.golden.at("projector.out")), tol.projector);
    if (gate(c, size, "two_stage.enc_class_logits")) {
        report(size, "two_stage.enc_class_logits", max_abs(m.enc_class_logits(), c.golden.at("two_stage.enc_class_logits").f32),
               tol.enc_logits);
    }
    report(size, "two_stage.enc_coords", max_abs(m.enc_coords(), c.golden.at("two_stage.enc_coords").f32), tol.ref_points);

    const auto &         gi = c.golden.at("two_stage.topk_indices").i64;
    std::vector<int64_t> ours(m.topk_indices(), m.topk_indices() + Q);
    size_t               mism = 0;
    ASSERT_TRUE(rfdetr::test::topk_swaps_are_near_ties(ours, gi, c.detections, &mism)) << "top-k differs outside the listed near ties";
    std::printf("seg-%s cpu top-%d: %zu ranks differ (near ties)\n", size.c_str(), Q, mism);
    std::vector<int32_t> forced(gi.begin(), gi.end());
    m.set_topk_override(forced.data());
    m.forward(px, logits.data(), boxes.data());
    const std::vector<std::tuple<const char *, const float *, double>> stages = {
        {"decoder.reference_points", m.reference_points(), tol.ref_points},
        {"decoder.query_pos", m.query_pos(), tol.query_pos},
        {"decoder.layer_outputs", m.layer_outputs(), tol.decoder},
        {"decoder.hs_last", m.hs(), tol.decoder},
        {"logits", logits.data(), tol.logits},
        {"pred_boxes", boxes.data(), tol.boxes},
    };
    for (const auto & [name, got, t] : stages) {
        if (gate(c, size, name)) report(size, name, max_abs(got, c.golden.at(name).f32), t);
    }

    // The mask head: its intermediates through the test tap, then the stored planes' rows only.
    std::map<std::string, std::vector<float>> maps;
    m.mask_head()->tap = [&](const std::string & name, const float * x) { maps[name].assign(x, x + (size_t)M * M * a.d_model); };
    std::vector<uint32_t> sel;
    const golden_tensor * want_masks = nullptr;
    if (c.golden.count("pred_masks")) {
        sel.resize(Q);
        std::iota(sel.begin(), sel.end(), 0);
        want_masks = &c.golden.at("pred_masks");
    } else {
        const auto & q = c.golden.at("pred_masks_sel_queries").i64;
        sel.assign(q.begin(), q.end());
        want_masks = &c.golden.at("pred_masks_sel");
    }
    ASSERT_FALSE(sel.empty());
    std::vector<float> masks(sel.size() * M * M);
    m.masks(sel.data(), (int)sel.size(), masks.data());
    m.mask_head()->tap = nullptr;
    ASSERT_EQ(maps.size(), (size_t)(1 + a.dec_layers)) << "one upsampled map and one per depthwise-conv block";
    for (const auto & [name, x] : maps) {
        report(size, "seg.crop." + name, rfdetr::test::crop_max_abs(x, M, a.d_model, c.golden.at("seg.crop." + name)), k_tol_head);
    }
    {
        std::vector<float> s((size_t)M * M * a.d_model);
        for (int p = 0; p < M * M; ++p) {
            for (int ch = 0; ch < a.d_model; ++ch) s[(size_t)p * a.d_model + ch] = m.mask_head()->spatial_at(p, ch);
        }
        report(size, "seg.crop.spatial_proj", rfdetr::test::crop_max_abs(s, M, a.d_model, c.golden.at("seg.crop.spatial_proj")), k_tol_head);
    }
    {
        const auto & qf = c.golden.at("seg.query_features").f32;
        double       e  = 0;
        for (size_t i = 0; i < sel.size(); ++i) {
            for (int ch = 0; ch < a.d_model; ++ch) {
                e = std::max(e, std::fabs((double)m.mask_head()->query_features()[i * a.d_model + ch] - qf[(size_t)sel[i] * a.d_model + ch]));
            }
        }
        report(size, "seg.query_features (" + std::to_string(sel.size()) + " rows)", e, k_tol_head);
    }
    ASSERT_EQ(want_masks->numel(), (int64_t)masks.size());
    report(size, std::string(c.golden.count("pred_masks") ? "pred_masks" : "pred_masks_sel") + " (" + std::to_string(sel.size()) + " rows)",
           max_abs(masks.data(), want_masks->f32), k_tol_masks);

    m.set_topk_override(nullptr);
    m.forward(px, logits.data(), boxes.data());
    family_case contract = c;
    contract.detections["detections"] = c.detections["contract_per_query_max"];
    for (const char * thr : {"0.5", "0.3"}) {
        EXPECT_EQ(rfdetr::test::detections_differ(logits, boxes, C, contract, thr, 0.05, 1e-4), "") << thr;
    }
}

}  // namespace

TEST(SegParity, Nano) { run_size("nano"); }

// The engine computes exactly the rows select_rows picks from its logits, in that order, each equal to the
// golden's plane of that query; without a selection (or with max 0) no rows and no mask output to write.
TEST(SegParity, NanoThroughTheEngineComputesTheSelectedRows) {
    const std::string fix = rfdetr::test::seg_fixtures_dir(), weights = rfdetr::test::family_weights_dir("seg-nano");
    if (fix.empty()) RFDETR_SKIP_OR_FAIL("no ../shared/fixtures/rfdetr-seg (set RFDETR_SEG_FIXTURES)");
    if (!exists(weights + "/model.safetensors")) RFDETR_SKIP_OR_FAIL("no " + weights + " (run the synth_seg ctest fixture)");
    const auto g = rfdetr::test::read_golden(fix + "/nano/case-1/golden.safetensors");
    auto       e = rfdetr::engine_create("cpu", weights, {});
    ASSERT_EQ(e->task(), "segment");
    rfdetr::output_buffers out(e->outputs());
    const float *          px    = g.at("pixel_values").f32.data();
    const size_t           plane = 78 * 78;

    rfdetr::row_select sel;
    sel.threshold = 0.3;
    sel.max       = 1000;
    rfdetr::engine_forward(*e, px, out, sel);
    const std::vector<uint32_t> rows = out.rows();
    const auto want_rows = rfdetr::select_rows(out.values(0).data(), 100, e->num_classes(), sel);
    ASSERT_EQ(rows, want_rows);
    ASSERT_EQ(rows.size(), 54u) << "the fixture's 54 queries scoring > 0.3";
    const std::vector<float> & masks = out.values(2);
    ASSERT_EQ(masks.size(), rows.size() * plane);
    double worst = 0;
    for (size_t r = 0; r < rows.size(); ++r) {
        for (size_t i = 0; i < plane; ++i) {
            worst = std::max(worst, std::fabs((double)masks[r * plane + i] - g.at("pred_masks").f32[rows[r] * plane + i]));
        }
    }
    report("nano", "engine pred_masks (54 selected rows)", worst, k_tol_masks);

    sel.max = 0;
    rfdetr::engine_forward(*e, px, out, sel);
    EXPECT_TRUE(out.rows().empty());
    rfdetr::engine_forward(*e, px, out);
    EXPECT_TRUE(out.rows().empty());
}
TEST(SegParity, Small) { run_size("small"); }
TEST(SegParity, Medium) { run_size("medium"); }
TEST(SegParity, Large) { run_size("large"); }
