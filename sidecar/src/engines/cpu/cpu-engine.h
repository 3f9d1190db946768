// The "cpu" engine: the embedded default and the numerical oracle of the other engines.
#pragma once

#include "engines/engine.h"

#include <memory>
#include <string>

namespace rfdetr {

// Loads weights_dir (model.safetensors + config.json) and sizes every buffer. Throws rfdetr::error.
std::unique_ptr<engine> cpu_engine_create(const std::string & weights_dir, const engine_options & opts);

}  // namespace rfdetr
