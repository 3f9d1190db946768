// Engines `tt-host` (the TT device graph on the host implementation of its op vocabulary: a slow validation
// engine, precision fp32|bf16) and `tt` (the same graph on a Tenstorrent device through ttnn, at the bf16 device
// precision plan only; only in builds configured with -DRFDETR_WITH_TTNN=ON, otherwise it refuses to start and
// says how to build it). Their precisions and host-core use are rows of the registry (registry.cpp).
#pragma once

#include "engines/engine.h"

#include <memory>
#include <string>

namespace rfdetr {

std::unique_ptr<engine> tt_host_engine_create(const std::string & weights_dir, const engine_options & opts);
std::unique_ptr<engine> tt_engine_create(const std::string & weights_dir, const engine_options & opts);
// Why `tt` cannot start in this build (how to build it), or nullptr when ttnn support is compiled in.
const char * tt_engine_unbuilt_reason();

namespace tt {
// Validates TT_MESH_SHAPE: unset, empty or "1x1" is accepted; anything else throws rfdetr::error naming the
// value and the reason (this engine drives one chip; RF-DETR-base at batch 1 does not shard).
void tt_check_mesh_shape(const char * value);
}  // namespace tt

}  // namespace rfdetr
