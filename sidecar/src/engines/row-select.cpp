// The selection rule (row-select.h); the client's side is src/detect/postprocess.ts.
#include "engines/row-select.h"

#include <algorithm>
#include <cmath>

namespace rfdetr {

namespace {

double sigmoid_f64(float logit) {
    return 1.0 / (1.0 + std::exp(-static_cast<double>(logit)));
}

struct candidate {
    float    logit;
    uint32_t query;
};

}  // namespace

std::vector<uint32_t> select_rows(const float * logits, int num_queries, int num_classes, const row_select & sel) {
    std::vector<uint32_t> rows;
    if (sel.max == 0 || num_queries <= 0 || num_classes <= 0) {
        return rows;
    }
    std::vector<candidate> cands;
    for (int q = 0; q < num_queries; q++) {
        const float * row   = logits + static_cast<size_t>(q) * static_cast<size_t>(num_classes);
        int           label = -1;
        float         best  = 0.0f;
        for (int c = 0; c < num_classes; c++) {
            const float v = row[c];
            if (v == v && (label < 0 || v > best)) {
                label = c;
                best  = v;
            }
        }
        if (label < 0) {
            continue;  // every logit NaN: the client keeps no detection for it
        }
        const auto lab = static_cast<uint64_t>(label);
        if (sel.has_classes && std::find(sel.classes.begin(), sel.classes.end(), lab) == sel.classes.end()) {
            continue;
        }
        double thr = sel.threshold;
        for (const auto & ct : sel.class_thresholds) {
            if (ct.first == lab) {
                thr = ct.second;
                break;
            }
        }
        if (sigmoid_f64(best) > thr - k_select_margin) {
            cands.push_back({best, static_cast<uint32_t>(q)});
        }
    }
    std::sort(cands.begin(), cands.end(), [](const candidate & a, const candidate & b) {
        return a.logit != b.logit ? a.logit > b.logit : a.query < b.query;
    });
    if (cands.size() <= sel.max) {
        for (const auto & c : cands) {
            rows.push_back(c.query);
        }
        return rows;
    }
    const double floor = sigmoid_f64(cands[sel.max - 1].logit) - k_select_margin;
    for (size_t i = 0; i < cands.size() && (i < sel.max || sigmoid_f64(cands[i].logit) >= floor); i++) {
        rows.push_back(cands[i].query);
    }
    return rows;
}

}  // namespace rfdetr
