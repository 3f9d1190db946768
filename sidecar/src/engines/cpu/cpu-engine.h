// The "cpu" engine: the embedded default and the numerical oracle of the other engines.
#pragma once

#include "engines/engine.h"

#include <memory>
#include <string>

namespace rfdetr {

// Loads weights_dir (model.safetensors + config.json) and sizes every buffer. Throws rfdetr::error.
std::unique_ptr<engine> cpu_engine_create(const std::string & weights_dir, const engine_options & opts);

// The registry's precision_refusal: "" when `precision` runs on this CPU (under RFDETR_CPU_ISA's level); for bf16
// on a CPU (or level) without AVX512-BF16 / AMX-BF16, the missing instructions and the precisions that run.
std::string cpu_precision_refusal(const std::string & precision);

}  // namespace rfdetr
