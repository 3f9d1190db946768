#include "seg-case.h"

#include <sys/stat.h>

#include <cstdlib>
#include <cstring>
#include <iterator>
#include <fstream>
#include <stdexcept>

namespace rfdetr::test {

namespace {

bool exists(const std::string & p) {
    struct stat st;
    return ::stat(p.c_str(), &st) == 0;
}

}  // namespace

std::string seg_weights_dir(const std::string & size) {
    return family_weights_dir("seg-" + size);
}

std::string seg_missing(const std::string & size) {
    const std::string fix = seg_fixtures_dir();
    if (fix.empty()) return "no ../shared/fixtures/rfdetr-seg (set RFDETR_SEG_FIXTURES)";
    if (!exists(fix + "/" + size + "/case-1/golden.safetensors")) return "no " + fix + "/" + size + "/case-1/golden.safetensors";
    if (!exists(seg_weights_dir(size) + "/model.safetensors")) return "no " + seg_weights_dir(size) + " (run the synth_seg ctest fixture)";
    return "";
}

seg_case seg_load(const std::string & size) {
    const std::string d = seg_fixtures_dir() + "/" + size + "/case-1";
    seg_case          c;
    c.variant = size;
    c.weights = seg_weights_dir(size);
    c.golden  = read_golden(d + "/golden.safetensors");
    std::ifstream f(d + "/detections.json");
    if (!f) throw std::runtime_error("seg_load: cannot open " + d + "/detections.json");
    // Python's json writes non-finite margins as bare Infinity / NaN, which JSON (and nlohmann) rejects: as null.
    std::string text((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
    for (const char * lit : { "-Infinity", "Infinity", "NaN" }) {
        for (size_t at; (at = text.find(std::string(": ") + lit)) != std::string::npos;) {
            text.replace(at + 2, std::strlen(lit), "null");
        }
    }
    c.detections = nlohmann::json::parse(text);
    return c;
}

bool seg_topk_swaps_are_near_ties(const std::vector<int64_t> & ours, const seg_case & c) {
    const auto &   ref = c.golden.at("two_stage.topk_indices").i64;
    nlohmann::json pairs;
    for (const auto & [k, v] : c.detections.at("two_stage_topk").items()) {
        if (k.rfind("near_tie_pairs_top", 0) == 0) pairs = v;
    }
    for (size_t i = 0; i < ref.size() && i < ours.size(); ++i) {
        if (ours[i] == ref[i]) continue;
        bool listed = false;
        for (const auto & p : pairs) {
            const size_t r = p.at("rank").get<size_t>();
            listed         = listed || i == r || i == r + 1;
        }
        if (!listed) return false;
    }
    return ours.size() == ref.size();
}

std::vector<int> seg_mask_rows(const seg_case & c) {
    std::vector<int> rows;
    if (c.golden.count("pred_masks")) {
        for (int64_t q = 0; q < c.golden.at("pred_masks").shape[1]; ++q) rows.push_back((int)q);
    } else {
        for (int64_t q : c.golden.at("pred_masks_sel_queries").i64) rows.push_back((int)q);
    }
    return rows;
}

std::vector<float> seg_mask_planes(const seg_case & c, const std::vector<int> & rows) {
    const bool         full  = c.golden.count("pred_masks") > 0;
    const auto &       g     = c.golden.at(full ? "pred_masks" : "pred_masks_sel");
    const size_t       plane = (size_t)(g.shape[2] * g.shape[3]);
    std::vector<float> out;
    for (size_t i = 0; i < rows.size(); ++i) {
        const size_t at = full ? (size_t)rows[i] : i;
        out.insert(out.end(), g.f32.begin() + at * plane, g.f32.begin() + (at + 1) * plane);
    }
    return out;
}

}  // namespace rfdetr::test
