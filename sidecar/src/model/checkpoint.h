// A loaded RF-DETR-base checkpoint directory: model.safetensors (mmapped, validated against the one schema
// in sidecar/schema/rfdetr-base.json) and config.json (id2label). Engines read tensors through this.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace rfdetr {

struct tensor_view {
    const float *        data = nullptr;  // little-endian f32, row-major, valid while the checkpoint lives
    std::vector<int64_t> shape;
    int64_t              numel() const;
};

class checkpoint {
  public:
    // Opens DIR/model.safetensors and DIR/config.json. Validates the safetensors header (dtypes, shapes,
    // offsets inside the file, no overlaps, size), the strict key set (missing and unexpected keys, first 20
    // of each), every shape against the schema (class axis from class_embed rows), and config.json
    // (id2label required, its count equal to the checkpoint's class count; a present field that contradicts
    // the checkpoint's shapes is refused by name). Throws rfdetr::error naming the file and the fix.
    static std::unique_ptr<checkpoint> open(const std::string & weights_dir);

    virtual ~checkpoint() = default;

    // Throws rfdetr::error if the tensor is not in the schema (programmer error: the schema is strict).
    virtual const tensor_view & get(const std::string & name) const = 0;
    virtual int num_classes() const = 0;                        // class_embed.weight rows (91 for COCO)
    virtual const std::vector<std::string> & labels() const = 0;  // per class index; "N/A" where id2label lacks it
    virtual const std::string & dir() const = 0;
};

}  // namespace rfdetr
