// The ttnn implementation of the TT op vocabulary (built only with -DRFDETR_WITH_TTNN=ON). Every op is one
// ttnn call (plus the layout conversions named in TTNN_CALLS.md); nothing in it is compiled or run here.
#pragma once

#include "engines/tt/tt-ops.h"

#include <memory>

namespace rfdetr {
namespace tt {

// Opens device `device_id` (as numbered after TT_METAL_VISIBLE_DEVICES, which tt-metal applies itself) with
// l1_small_size=32768, trace_region_size=90'000'000, one command queue and the program cache on.
// Throws rfdetr::error naming the device and the fix when the open fails.
std::unique_ptr<tt_ops> tt_ops_ttnn_open(int device_id);

}  // namespace tt
}  // namespace rfdetr
