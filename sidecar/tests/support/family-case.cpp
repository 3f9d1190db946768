#include "family-case.h"

#include "detections.h"

#include <gtest/gtest.h>

#include <sys/stat.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <numeric>
#include <set>
#include <stdexcept>

namespace rfdetr::test {

namespace {

bool exists(const std::string & p) {
    struct stat st;
    return ::stat(p.c_str(), &st) == 0;
}

nlohmann::json read_json(const std::string & path) {
    std::ifstream f(path);
    if (!f) throw std::runtime_error("family_load: cannot open " + path);
    return nlohmann::json::parse(f);
}

}  // namespace

const std::vector<std::string> & family_variants() {
    static const std::vector<std::string> v = { "nano", "small", "medium", "large", "large_deprecated" };
    return v;
}

std::string family_missing(const std::string & variant) {
    const std::string fam = family_fixtures_dir();
    if (fam.empty()) return "no ../shared/fixtures/rfdetr-family (set RFDETR_FAMILY_FIXTURES)";
    if (!exists(fam + "/" + variant + "/case-1/golden.safetensors")) return "no " + fam + "/" + variant + "/case-1";
    if (!exists(family_weights_dir(variant) + "/model.safetensors")) {
        return "no " + family_weights_dir(variant) + " (run the synth_family ctest fixture)";
    }
    return "";
}

family_case family_load(const std::string & variant) {
    const std::string d = family_fixtures_dir() + "/" + variant + "/case-1";
    family_case       c;
    c.variant    = variant;
    c.weights    = family_weights_dir(variant);
    c.golden     = read_golden(d + "/golden.safetensors");
    c.detections = read_json(d + "/detections.json");
    return c;
}

bool family_gate(const family_case & c, const std::string & key) {
    // Each variant's "Not stored" list (the fixtures' README per variant, and dropped_for_size in the golden).
    static const std::map<std::string, std::set<std::string>> k_not_stored = {
        { "nano", { "backbone.pos_embed_interp" } },
        { "small", { "backbone.pos_embed_interp", "backbone.embeddings" } },
        { "medium", { "backbone.pos_embed_interp", "backbone.embeddings", "decoder.layer_outputs" } },
        { "large", { "backbone.pos_embed_interp", "backbone.embeddings", "two_stage.enc_class_logits", "decoder.query_pos",
                     "decoder.layer_outputs" } },
        { "large_deprecated", { "backbone.pos_embed_interp", "backbone.embeddings", "two_stage.enc_class_logits" } },
    };
    const auto v = k_not_stored.find(c.variant);
    if (v == k_not_stored.end()) {
        ADD_FAILURE() << "family_gate: no not-stored list for variant '" << c.variant << "'; add one to family-case.cpp";
        return false;
    }
    const bool stored = c.golden.count(key) != 0;
    if (v->second.count(key)) {
        EXPECT_FALSE(stored) << c.variant << "'s golden stores " << key
                             << ", listed as not stored: remove it from family_gate's list so its gate runs";
        return false;
    }
    EXPECT_TRUE(stored) << c.variant << "'s golden lacks " << key
                        << ", which its README does not list as not stored: the fixture is incomplete (re-fetch it)";
    return stored;
}

tolerance family_tolerance(const std::string & variant) {
    tolerance t;
    if (variant == "large_deprecated") {  // its README: ~10x base's decoder tolerances (fp64 floor 20x base's)
        t.ref_points = 2e-4;
        t.query_pos  = 5e-5;
        t.decoder    = 1e-3;
        t.logits     = 3e-3;
        t.boxes      = 3e-4;
    }
    return t;
}

double crop_max_abs(const std::vector<float> & ours, int H, int C, const golden_tensor & g, std::string * at) {
    if (g.shape.size() != 4 || g.shape[1] != C) throw std::runtime_error("crop_max_abs: golden is not [1, C, h, w]");
    const int h = (int)g.shape[2], w = (int)g.shape[3];
    double    worst = 0;
    for (int c = 0; c < C; ++c) {
        for (int y = 0; y < h; ++y) {
            for (int x = 0; x < w; ++x) {
                const float  a = ours[((size_t)y * H + x) * C + c];
                const float  b = g.f32[((size_t)c * h + y) * w + x];
                const double e = std::isfinite(a) ? std::fabs((double)a - b) : INFINITY;
                if (e > worst) {
                    worst = e;
                    if (at) *at = "c" + std::to_string(c) + " y" + std::to_string(y) + " x" + std::to_string(x);
                }
            }
        }
    }
    return worst;
}

bool topk_swaps_are_near_ties(const std::vector<int64_t> & ours, const family_case & c, size_t * mismatches) {
    return topk_swaps_are_near_ties(ours, c.golden.at("two_stage.topk_indices").i64, c.detections, mismatches);
}

std::string detections_differ(const std::vector<float> & logits, const std::vector<float> & boxes, int C,
                              const family_case & c, const std::string & thr, double box_px, double score_tol) {
    const float W = c.detections["image"]["width"].get<float>(), H = c.detections["image"]["height"].get<float>();
    const auto  ours = postprocess(logits, boxes, C, std::stof(thr), W, H);
    const auto & ref = c.detections["detections"][thr];
    if (ours.size() != ref.size()) {
        return std::to_string(ours.size()) + " detections at " + thr + ", reference " + std::to_string(ref.size());
    }
    for (size_t i = 0; i < ours.size(); ++i) {
        const auto & r = ref[i];
        if (ours[i].query != r["query"].get<int>() || ours[i].label != r["label"].get<int>()) {
            return "detection " + std::to_string(i) + " at " + thr + " is query " + std::to_string(ours[i].query) + " label " +
                   std::to_string(ours[i].label) + ", reference query " + std::to_string(r["query"].get<int>()) + " label " +
                   std::to_string(r["label"].get<int>());
        }
        if (std::fabs(ours[i].score - r["score"].get<double>()) > score_tol) {
            return "detection " + std::to_string(i) + " score " + std::to_string(ours[i].score) + " vs " + std::to_string(r["score"].get<double>());
        }
        for (int k = 0; k < 4; ++k) {
            if (std::fabs(ours[i].box[k] - r["box_xyxy"][k].get<double>()) > box_px) {
                return "detection " + std::to_string(i) + " box[" + std::to_string(k) + "] " + std::to_string(ours[i].box[k]) +
                       " vs " + std::to_string(r["box_xyxy"][k].get<double>());
            }
        }
    }
    return "";
}

}  // namespace rfdetr::test
