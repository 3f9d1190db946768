// Which checkpoint tasks the engines compute. RF-DETR Seg checkpoints load (model/identify.h) before any
// engine runs their mask head, so each engine factory asks here right after opening the checkpoint and a
// Seg checkpoint is refused by name instead of being run as a detector with the wrong geometry.
#pragma once

#include <string>

#include "model/schema.h"

namespace rfdetr {

// Throws rfdetr::error when engine `engine_name` cannot run the head of `sch` (today: any task "segment").
void engine_require_task(const std::string & engine_name, const schema & sch);

}  // namespace rfdetr
