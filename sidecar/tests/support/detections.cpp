#include "detections.h"

#include <algorithm>
#include <cmath>
#include <set>

namespace rfdetr::test {

std::vector<detection> postprocess(const std::vector<float> & logits, const std::vector<float> & boxes, int C,
                                   float threshold, float W, float H) {
    std::vector<detection> out;
    const int              Q = static_cast<int>(boxes.size() / 4);
    for (int q = 0; q < Q; ++q) {
        int best = 0;
        for (int k = 1; k < C; ++k) best = logits[(size_t)q * C + k] > logits[(size_t)q * C + best] ? k : best;
        const float score = 1.0f / (1.0f + std::exp(-logits[(size_t)q * C + best]));
        if (!(score > threshold)) continue;
        const float * b = &boxes[(size_t)q * 4];
        const float   w = std::max(b[2], 0.0f), h = std::max(b[3], 0.0f);
        out.push_back({ q, best, score,
                        { std::clamp((b[0] - 0.5f * w) * W, 0.0f, W), std::clamp((b[1] - 0.5f * h) * H, 0.0f, H),
                          std::clamp((b[0] + 0.5f * w) * W, 0.0f, W), std::clamp((b[1] + 0.5f * h) * H, 0.0f, H) } });
    }
    std::stable_sort(out.begin(), out.end(), [](const detection & a, const detection & b) { return a.score > b.score; });
    return out;
}

namespace {

double iou(const float * a, const float * b) {
    const double iw = std::max(0.0, (double)std::min(a[2], b[2]) - std::max(a[0], b[0]));
    const double ih = std::max(0.0, (double)std::min(a[3], b[3]) - std::max(a[1], b[1]));
    const double in = iw * ih;
    const double un = (double)(a[2] - a[0]) * (a[3] - a[1]) + (double)(b[2] - b[0]) * (b[3] - b[1]) - in;
    if (un <= 0.0) {
        // Two zero-area boxes (clamped to an image edge; the fixtures keep a few on purpose): a match when
        // every coordinate agrees to within a pixel, else none.
        for (int i = 0; i < 4; ++i) {
            if (std::fabs(a[i] - b[i]) > 1.0f) return 0.0;
        }
        return 1.0;
    }
    return in / un;
}

}  // namespace

double detection_iou(const std::vector<detection> & ours, const nlohmann::json & reference) {
    if (reference.empty()) return ours.empty() ? 100.0 : 0.0;
    double sum = 0;
    for (const auto & r : reference) {
        float rb[4];
        for (int i = 0; i < 4; ++i) rb[i] = r["box_xyxy"][i].get<float>();
        double best = 0;
        for (const auto & d : ours) {
            if (d.label == r["label"].get<int>()) best = std::max(best, iou(d.box, rb));
        }
        sum += best;
    }
    return 100.0 * sum / (double)reference.size();
}

bool topk_swaps_are_near_ties(const std::vector<int64_t> & ours, const std::vector<int64_t> & gi,
                              const nlohmann::json & detections, size_t * mismatches) {
    size_t n  = 0;
    bool   ok = true;
    for (size_t r = 0; r < gi.size(); ++r) {
        if (ours[r] == gi[r]) continue;
        ++n;
        bool tie = false;
        for (const auto & p : detections["two_stage_topk"]["near_tie_pairs_top" + std::to_string(gi.size())]) {
            const size_t rank = p["rank"].get<size_t>();
            if (r != rank && r != rank + 1) continue;
            const std::set<int64_t> pair = { p["query_pair"][0].get<int64_t>(), p["query_pair"][1].get<int64_t>() };
            tie |= std::set<int64_t>{ ours[rank], ours[rank + 1] } == pair && std::set<int64_t>{ gi[rank], gi[rank + 1] } == pair;
        }
        ok &= tie;
    }
    if (mismatches) *mismatches = n;
    return ok;
}

}  // namespace rfdetr::test
