// The family fixtures' case-1 for the engine parity tests (tt-host and cpu): the goldens with their crops, the
// reference detections, the contract post-process, the tolerance table (Base's; LargeDeprecated's decoder
// tolerances 10x, as its README says) and the near-tie rule for top-k swaps.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "golden-file.h"

namespace rfdetr::test {

struct family_case {
    std::string                          variant;
    std::string                          weights;  // the variant's seed-1 synthetic checkpoint directory
    std::map<std::string, golden_tensor> golden;
    nlohmann::json                       detections;
};

// The variants with fixtures: nano, small, medium, large, large_deprecated.
const std::vector<std::string> & family_variants();
// Why the variant's case cannot run ("" when it can): fixtures or the synth_family checkpoint missing.
std::string family_missing(const std::string & variant);
family_case family_load(const std::string & variant);

// Whether a stage gate on `key` runs for this case: false only for a tensor the variant's golden does not store
// (its README's "Not stored", the golden's dropped_for_size metadata). A key missing otherwise, or stored although
// listed as not stored, fails the calling test, so a gate never vanishes with its golden key.
bool family_gate(const family_case & c, const std::string & key);

// Base's table (the cpu parity test's): decoder = layer outputs and hs_last.
struct tolerance {
    double feature_map = 5e-5, projector = 1e-4, enc_logits = 1e-4, ref_points = 2e-5, query_pos = 5e-6, decoder = 1e-4,
           logits = 3e-4, boxes = 2e-5;
};
tolerance family_tolerance(const std::string & variant);

// max |ours - golden| for a channels-last map ours [H*W, C] against a golden [1, C, h, w] that is the top-left
// h x w crop of the H x W map (h == H for an uncropped one). `at` names the worst element.
double crop_max_abs(const std::vector<float> & ours, int H, int C, const golden_tensor & golden, std::string * at = nullptr);

// Rank positions where `ours` differs from the reference top-k; true when each is one side of a listed near tie.
bool topk_swaps_are_near_ties(const std::vector<int64_t> & ours, const family_case & c, size_t * mismatches);

// The contract's post-process (score = max sigmoid, label = argmax, keep > thr, sort by score then query,
// xyxy clamped) compared with detections.json at `thr` ("0.5" or "0.3"): same queries, labels and order,
// boxes within `box_px` pixels, scores within `score_tol`. Returns "" or what differs.
std::string detections_differ(const std::vector<float> & logits, const std::vector<float> & boxes, int num_classes,
                              const family_case & c, const std::string & thr, double box_px, double score_tol);

}  // namespace rfdetr::test
