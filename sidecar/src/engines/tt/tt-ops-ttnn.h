// The ttnn implementation of the TT op vocabulary (built only with -DRFDETR_WITH_TTNN=ON). Every op is one
// ttnn call (plus the layout conversions named in TTNN_CALLS.md); compiled and linked in CI against ttnn 0.70.1,
// never run on a card.
#pragma once

#include "engines/tt/tt-ops.h"

#include <memory>

namespace rfdetr {
namespace tt {

// Opens device `device_id` (as numbered after TT_METAL_VISIBLE_DEVICES, which tt-metal applies itself) with
// l1_small_size=32768, trace_region_size=90'000'000, one command queue and the program cache on.
// Throws rfdetr::error naming the device, ttnn's reason and what to check when the open fails, and naming the
// op and the ttnn release it needs when this build lacks one (after opening, so the card is reported first).
std::unique_ptr<tt_ops> tt_ops_ttnn_open(int device_id);

}  // namespace tt
}  // namespace rfdetr
