// The selection rule of a task's selected output (sidecar/PROTOCOL.md, "Selected rows"): which queries' rows an
// infer reply carries, decided from the forward's logits before the engine computes the selected output, so an
// unselected query costs nothing. Every engine calls select_rows(); the client's postprocess keeps a subset of
// these rows, so the rule keeps a superset of what it can keep (the 2^-20 margins below).
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

namespace rfdetr {

// An infer request's `select`: {threshold, max, classes?, class_thresholds?}.
struct row_select {
    double                                   threshold = 0.0;  // 0..1, on sigmoid(logit)
    uint64_t                                 max       = 0;    // rows before near-ties; 0 = none
    bool                                     has_classes = false;
    std::vector<uint64_t>                    classes;           // when has_classes: the labels a row may have
    std::vector<std::pair<uint64_t, double>> class_thresholds;  // label -> its threshold (the first entry wins)
};

// The query indices whose rows a selected output carries, in row order, for logits f32 [num_queries, num_classes]:
//  1. label = argmax_c logits[q, c] (first max wins, NaN never wins; an all-NaN row is skipped), L its logit;
//  2. skip q when `classes` is given and lacks label;
//  3. keep q when sigmoid_f64(L) > thr - 2^-20, thr = class_thresholds[label] or threshold;
//  4. sort by L descending, ties by q ascending; take the first `max`, then every following candidate whose
//     sigmoid_f64(L) >= sigmoid_f64(L of the max-th) - 2^-20 (near-ties and saturated scores the client's f32
//     sigmoid may order either way).
// max = 0 gives no rows.
std::vector<uint32_t> select_rows(const float * logits, int num_queries, int num_classes, const row_select & sel);

// 2^-20: the client's f32 sigmoid is within 2^-22 of the exact one, and f32(threshold) within 2^-25 of it.
constexpr double k_select_margin = 1.0 / (1 << 20);

}  // namespace rfdetr
