// The contract's postprocess for the C++ engine tests, written once: score = max sigmoid over the classes,
// label = its argmax, kept when score > threshold, sorted by score (query order among equal scores), boxes
// cxcywh -> xyxy in pixels clamped to the image. And the port's detection-IoU against a reference list.
// The served postprocess is the TypeScript one (src/detect/postprocess.ts); the fixtures' detections.json
// pin both to the same numbers.
#pragma once

#include <nlohmann/json.hpp>

#include <cstddef>
#include <cstdint>
#include <vector>

namespace rfdetr::test {

struct detection {
    int   query = 0, label = 0;
    float score  = 0.0f;
    float box[4] = {0, 0, 0, 0};  // x1, y1, x2, y2 in pixels
};

// logits [Q, num_classes], boxes [Q, 4] normalised cxcywh, for a W x H image.
std::vector<detection> postprocess(const std::vector<float> & logits, const std::vector<float> & boxes, int num_classes,
                                   float threshold, float W, float H);

// For each reference detection (detections.json's {label, box_xyxy} list), the best IoU among `ours` with the
// same label; mean x 100. 100 when both are empty, 0 when only the reference is.
double detection_iou(const std::vector<detection> & ours, const nlohmann::json & reference);

// The two-stage top-k against the reference's: true when every rank where they differ is one side of a near-tie
// pair detections.json lists (two_stage_topk.near_tie_pairs_top<K>, K = the reference's length: 300 for the
// detection family, 100 or 200 for Seg), both sides holding that pair.
// `mismatches` gets the number of differing ranks.
bool topk_swaps_are_near_ties(const std::vector<int64_t> & ours, const std::vector<int64_t> & reference,
                              const nlohmann::json & detections, size_t * mismatches = nullptr);

}  // namespace rfdetr::test
