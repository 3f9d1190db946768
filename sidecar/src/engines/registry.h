// The engine registry: the one table of engine facts (name, precisions, host cores, how to create it, why a
// build lacks it). `--list-engines`, the precision check before loading, the hello's `precisions` and
// `host_cores`, and the pipeline's resize placement all read it.
#pragma once

#include "engines/engine.h"

#include <memory>
#include <string>
#include <vector>

namespace rfdetr {

using engine_create_fn = std::unique_ptr<engine> (*)(const std::string & weights_dir, const engine_options & opts);

struct engine_entry {
    std::string              name;
    std::vector<std::string> precisions;  // what the engine can run, its default first
    // True when forward() computes on this machine's cores: the server then resizes each request on the
    // forward thread just before its forward (a concurrent resize would compete with the engine's threads);
    // false (an accelerator) lets it resize request N+1 while request N is on the device.
    bool             host_cores = true;
    engine_create_fn create     = nullptr;
    const char * (*unbuilt_reason)() = nullptr;  // nullptr: always built; else non-null text when this build lacks it
    // nullptr: every listed precision runs here; else "" when `precision` (one of the listed) runs on this host,
    // or why not and what does (the cpu engine's bf16 on a CPU without bf16 instructions).
    std::string (*precision_refusal)(const std::string & precision) = nullptr;
    // nullptr: nothing; else run once when a sidecar starts this engine, after its flags are read and before
    // anything else: it may re-execute the process with a changed environment (tt-host: OpenBLAS's kernels on a CPU
    // OpenBLAS does not recognise, openblas-core.h).
    void (*process_setup)(char ** argv) = nullptr;
};

using engine_table = std::vector<engine_entry>;

// The engines this project knows (built into this binary or not), in preference order.
const engine_table & engine_registry();

// The entry named `name`, or nullptr.
const engine_entry * engine_find(const engine_table & table, const std::string & name);

// Why this build lacks the engine (how to build it), or "" when it is built.
std::string engine_unbuilt_reason(const engine_entry & e);

// "" when the engine runs `precision` (listed, and not refused on this host by its precision_refusal); else what
// was wrong and the engine's precisions.
std::string engine_precision_error(const engine_entry & e, const std::string & precision);

// The names of the engines of `table` this build has, in table order.
std::vector<std::string> engine_names(const engine_table & table);

// Over engine_registry(): the built engines' names; why a known engine is unbuilt ("" when built or unknown).
std::vector<std::string> engine_names();
std::string              engine_unbuilt_reason(const std::string & name);

// Creates and loads a registry engine from a weights directory (model.safetensors + config.json), at
// opts.precision or, when empty, the engine's default. Throws rfdetr::error naming the engine, the file and
// the fix (an unknown engine, an unbuilt one, a precision it lacks). Never falls back to another engine.
std::unique_ptr<engine> engine_create(const std::string & name, const std::string & weights_dir,
                                      const engine_options & opts);

}  // namespace rfdetr
