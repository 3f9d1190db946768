// The RF-DETR detection family's checkpoint schemas (sidecar/schema/rfdetr-<variant>.json, embedded at build
// time): per variant its F32 tensors with their shapes, the synth rule (A, S), which axis (if any) is the class
// axis, the architecture the engines size themselves from, and the config.json fields of a synthetic checkpoint.
// Shared by the loader, the synthetic generator, the engines and the tests.
#pragma once

#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

namespace rfdetr {

struct schema_tensor {
    std::string          name;
    std::vector<int64_t> shape;           // with the schema's class count (91) on the class axis
    std::string          rule;            // generator rule name, e.g. "class_bias"
    double               a          = 0;  // synth offset A
    double               s          = 0;  // synth scale S (a power of two)
    int                  class_axis = -1; // axis whose size is the class count, -1 if none

    // The shape for a checkpoint with `num_classes` classes.
    std::vector<int64_t> shape_for(int64_t num_classes) const;
    int64_t              numel_for(int64_t num_classes) const;
};

// What the engines size themselves from (the schema's "architecture" block; every width agrees with the
// tensor shapes, which the loader checks strictly).
struct model_arch {
    std::string              task;         // "detect" | "segment" (RF-DETR Seg: segmentation_head.* tensors)
    std::string              encoder;      // "dinov2_windowed_small" | "dinov2_windowed_base"
    int                      resolution = 0;  // square input side in pixels
    int                      patch_size = 0;
    int                      num_windows = 0;  // windows per side
    int                      pos_grid = 0;     // position_embeddings grid side (interpolated when != grid())
    int                      vit_layers = 0, vit_hidden = 0, vit_heads = 0, vit_mlp = 0;
    std::vector<int>         out_feature_indexes;  // HF stage ids: the taps are the outputs of blocks idx - 1
    int                      d_model = 0;
    std::vector<std::string> projector_scale;  // "P3" | "P4" | "P5", one memory level each
    int                      c2f_blocks = 0, dec_layers = 0, sa_heads = 0, ca_heads = 0, dec_points = 0, ffn = 0;
    int                      num_queries = 0, group_detr = 0;
    // task "segment" only (0 for "detect"): the mask logits are [num_queries, mask_side(), mask_side()] with
    // mask_side() = resolution / mask_downsample (upstream mask_downsample_ratio, 4); the head has mask_blocks
    // segmentation_head.blocks.N (one per decoder layer).
    int                      mask_downsample = 0, mask_blocks = 0;

    bool segment() const { return task == "segment"; }
    int  mask_side() const { return mask_downsample > 0 ? resolution / mask_downsample : 0; }

    int  grid() const { return resolution / patch_size; }           // patches per side
    int  window_side() const { return grid() / num_windows; }       // patches per window side
    int  levels() const { return static_cast<int>(projector_scale.size()); }
    bool is_global(int block) const;                                // attends over all windows
    int  blocks_used() const;                                       // blocks 0..n-1 feed a tap
    int  tap_of_block(int block) const;                             // tap index whose source is `block`, or -1
};

struct schema {
    std::string                variant;       // "base", "nano", ..., "large_deprecated", "seg-nano", ..., "seg-2xlarge"
    std::string                model;         // "RF-DETR-Nano"
    std::string                config_class;  // "RFDETRNanoConfig"
    std::string                file;          // "rfdetr-nano.json"
    int                        num_classes = 91;  // the schema's default class count (COCO)
    model_arch                 arch;
    std::string                config_json;   // config.json fields of a synthetic checkpoint beyond coco-config.json
    std::vector<schema_tensor> tensors;       // in the schema's (upstream state_dict) order

    // nullptr when `name` is not in the schema.
    const schema_tensor * find(const std::string & name) const;

    std::unordered_map<std::string, size_t> index;
};

// Every embedded variant, base first (thread-safe, parsed once).
const std::vector<schema> & schemas_all();
// The variant's schema; throws rfdetr::error listing the supported variants for an unknown name.
const schema &             schema_get(const std::string & variant = "base");
// "base, nano, small, medium, large, large_deprecated, seg-nano, ..., seg-2xlarge"
std::string                schema_variant_names();

// One rule of sidecar/schema/transformers-keys.json: native key regex -> upstream key (fused parts in order).
struct key_rule {
    std::string              native;    // ECMAScript regex on the whole key
    std::string              upstream;  // replacement ($N = capture group)
    int                      fuse_part = 0;  // capture group naming the part, 0 = a plain rename
    std::vector<std::string> fuse_order;
};
struct key_map {
    std::string           marker;  // a key matching this regex marks the transformers layout
    std::vector<key_rule> rules;
};
const key_map & transformers_key_map();

// The embedded texts, verbatim from sidecar/schema/.
const char * schema_json_text(const std::string & variant = "base");
const char * coco_config_json_text();
const char * transformers_keys_json_text();

// "[91, 256]"
std::string shape_str(const std::vector<int64_t> & shape);

}  // namespace rfdetr
