// The rfdetr-seg golden cases for the TT graph tests: fixture and checkpoint paths, the golden tensors, and the
// goldens' mask rows (Nano/Small store every query's plane, Medium/Large the detection queries' planes).
#pragma once

#include "golden-file.h"

#include <nlohmann/json.hpp>

#include <map>
#include <string>
#include <vector>

namespace rfdetr::test {

struct seg_case {
    std::string                          variant;  // "nano" | "small" | "medium" | "large"
    std::string                          weights;  // the size's seed-1 synthetic checkpoint directory
    std::map<std::string, golden_tensor> golden;
    nlohmann::json                       detections;
};

// The seed-1 checkpoint of a Seg size written by the ctest fixture.
std::string seg_weights_dir(const std::string & size);
// Why the size's case cannot run ("" when it can).
std::string seg_missing(const std::string & size);
seg_case    seg_load(const std::string & size);

// Every rank where `ours` differs from two_stage.topk_indices is one side of a listed near-tie pair.
bool seg_topk_swaps_are_near_ties(const std::vector<int64_t> & ours, const seg_case & c);
// The query rows whose pred_masks planes the golden stores, and those planes [rows, M*M] in that order.
std::vector<int>   seg_mask_rows(const seg_case & c);
std::vector<float> seg_mask_planes(const seg_case & c, const std::vector<int> & rows);

// The golden's detections at `thr` ("0.5" | "0.3"): their queries, in list order (a query may repeat).
std::vector<int> seg_detection_queries(const seg_case & c, const std::string & thr);

// Each detection's mask at the original image size from our mask logits (planes [detections, M*M], in
// seg_detection_queries order), made as upstream does (bilinear align_corners=False from M x M to H x W, > 0),
// against the golden's RLE mask, outside its mask_near_zero pixels.
struct seg_image_masks {
    size_t detections = 0;
    size_t differing  = 0;  // pixels outside the near-zero set where ours and the golden's differ, all detections
    double iou_mean = 1, iou_min = 1;
};
seg_image_masks seg_compare_image_masks(const seg_case & c, const std::string & thr, const std::vector<float> & planes, int M);

}  // namespace rfdetr::test
