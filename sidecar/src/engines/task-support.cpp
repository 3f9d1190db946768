#include "engines/task-support.h"

#include "common/error.h"

namespace rfdetr {

void engine_require_task(const std::string & engine_name, const schema & sch) {
    if (sch.arch.task == "detect") {
        return;
    }
    throw error("the " + engine_name + " engine does not run RF-DETR Seg's mask head yet: the checkpoint is " +
                sch.model + " (task '" + sch.arch.task + "', variant " + sch.variant +
                "), which this build loads and validates but cannot serve. Serve an RF-DETR detection checkpoint "
                "(base, nano, small, medium, large, large_deprecated) instead.");
}

}  // namespace rfdetr
