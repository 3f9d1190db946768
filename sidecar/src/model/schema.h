// The one RF-DETR-base checkpoint schema (sidecar/schema/rfdetr-base.json, embedded at build time):
// 487 F32 tensors with their shapes, the synth rule (A, S) of rfdetr-synth SPEC v1, and which axis (if any)
// is the class axis. Shared by the loader, the synthetic generator and the tests.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace rfdetr {

struct schema_tensor {
    std::string          name;
    std::vector<int64_t> shape;           // with the schema's class count (91) on the class axis
    std::string          rule;            // SPEC rule name, e.g. "class_bias"
    double               a          = 0;  // synth offset A
    double               s          = 0;  // synth scale S (a power of two)
    int                  class_axis = -1; // axis whose size is the class count, -1 if none

    // The shape for a checkpoint with `num_classes` classes.
    std::vector<int64_t> shape_for(int64_t num_classes) const;
    int64_t              numel_for(int64_t num_classes) const;
};

struct schema {
    std::string                model;        // "RF-DETR-base"
    int                        num_classes;  // the schema's default class count (91, COCO)
    std::vector<schema_tensor> tensors;      // in the schema's (upstream state_dict) order

    // nullptr when `name` is not in the schema.
    const schema_tensor * find(const std::string & name) const;
};

// The embedded schema, parsed once (thread-safe).
const schema & schema_get();

// The embedded texts, verbatim from sidecar/schema/.
const char * schema_json_text();
const char * coco_config_json_text();

// "[91, 256]"
std::string shape_str(const std::vector<int64_t> & shape);

}  // namespace rfdetr
