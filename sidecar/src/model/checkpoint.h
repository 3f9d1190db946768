// A loaded RF-DETR checkpoint directory: model.safetensors (mmapped; its variant identified from the key set
// and shapes and validated against that variant's schema in sidecar/schema/, either key naming mapped once to
// upstream's) and config.json (id2label, checked against the variant). Engines read tensors through this, by
// upstream name, and size themselves from variant().arch.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "model/safetensors.h"
#include "model/schema.h"

namespace rfdetr {

struct tensor_view {
    const float *        data = nullptr;  // little-endian f32, row-major, valid while the checkpoint lives
    std::vector<int64_t> shape;
    int64_t              numel() const;
};

class checkpoint {
  public:
    // Opens DIR/model.safetensors and DIR/config.json. Validates the safetensors header (dtypes, shapes,
    // offsets inside the file, no overlaps, size), identifies the variant (checkpoint_identify: strict key set
    // and every shape, class axis from class_embed rows; unsupported kinds refused by name), and config.json
    // (id2label required, its count equal to the checkpoint's class count; a present field that contradicts
    // the checkpoint's shapes or names another variant is refused by name). Throws rfdetr::error naming the
    // file and the fix.
    static std::unique_ptr<checkpoint> open(const std::string & weights_dir);

    virtual ~checkpoint() = default;

    // By upstream name. Throws rfdetr::error if the tensor is not in the variant's schema (programmer error:
    // the schema is strict).
    virtual const tensor_view & get(const std::string & name) const = 0;
    virtual const schema & variant() const = 0;                  // the identified variant (and its arch)
    virtual const std::string & layout() const = 0;              // "upstream" | "transformers" key names
    virtual int num_classes() const = 0;                        // class_embed.weight rows (91 for COCO)
    virtual const std::vector<std::string> & labels() const = 0;  // per class index; "N/A" where id2label lacks it
    virtual const std::string & dir() const = 0;

    // The safetensors __metadata__ (e.g. format, and for rfdetr-synth output: synthetic, seed).
    virtual const std::map<std::string, std::string> & metadata() const = 0;
    // True when the checkpoint says it was made by rfdetr-synth (__metadata__ synthetic = "true" or
    // config.json "synthetic": true): its detections are meaningless; callers should say so loudly.
    virtual bool synthetic() const = 0;
};

// The validation steps of checkpoint::open, callable on their own (tests, tools).

// The class count of a header that identifies as a supported variant (checkpoint_identify); throws otherwise.
int checkpoint_check_tensors(const std::string & file, const st_header & header);

struct model_config {
    std::vector<std::string> labels;     // per class index, "N/A" where id2label lacks it
    bool                     synthetic = false;
};

// Parses config.json text for a checkpoint of variant `sch` with `num_classes` classes: id2label required,
// keys class indices "0".."num_classes-1", as many entries as classes; a present informational field that
// contradicts the shapes (d_model, num_labels, decoder_ffn_dim, backbone_config.hidden_size, ...) is refused
// by name with its value and the shape it contradicts, and one that names another variant (rfdetr.config_class,
// image_size, backbone_config.num_windows / out_indices, num_feature_levels, ...) by name with the variant the
// shapes say. `file` names config.json in errors.
model_config config_parse(const std::string & file, const std::string & text, const schema & sch, int num_classes);

}  // namespace rfdetr
