// Which RF-DETR checkpoint a safetensors header holds: the key naming (upstream rfdetr, or transformers'
// native RfDetrForObjectDetection mapped through sidecar/schema/transformers-keys.json), then the variant
// whose schema the key set and every shape match (class axes take the count from class_embed.weight rows).
// RF-DETR Seg checkpoints (segmentation_head.*) are identified the same way, under upstream names only.
// Unsupported kinds (keypoint heads, other backbones, detection XL/2XL, transformers-named Seg) are refused by name.
#pragma once

#include <string>
#include <vector>

#include "model/safetensors.h"
#include "model/schema.h"

namespace rfdetr {

struct identified_checkpoint {
    const schema * sch         = nullptr;
    int            num_classes = 0;
    std::string    layout;  // "upstream" | "transformers"
    // Per schema tensor (schema order): the file's tensors that make it, concatenated on axis 0 (one for a
    // plain tensor or a rename, the q|k|v parts for a fused in_proj).
    std::vector<std::vector<const st_tensor *>> sources;
};

// Throws rfdetr::error naming `file`, what was found and what is supported. The result points into `header`.
identified_checkpoint checkpoint_identify(const std::string & file, const st_header & header);

// "Supported: RF-DETR detection and segmentation (Seg) checkpoints of the variants ...": the sentence every
// refusal ends with.
std::string checkpoint_supported_text();

}  // namespace rfdetr
