// The table of engines built into this binary: name -> factory. The one place that knows them all.
#include "engine.h"

#include "engines/cpu/cpu-engine.h"
#include "engines/tt/tt-engine.h"

namespace rfdetr {

namespace {
struct engine_entry {
    const char * name;
    std::unique_ptr<engine> (*create)(const std::string & weights_dir, const engine_options & opts);
    const char * (*unbuilt_reason)();  // nullptr: always built; else non-null reason when this build lacks it
};

// Engines register here as they are built (cpu, tt, tt-host).
const engine_entry k_engines[] = {
    {"cpu", cpu_engine_create, nullptr},
    {"tt", tt_engine_create, tt_engine_unbuilt_reason},  // without RFDETR_WITH_TTNN: refuses, says how to build
    {"tt-host", tt_host_engine_create, nullptr},
};
}  // namespace

std::vector<std::string> engine_names() {
    std::vector<std::string> names;
    for (const auto & e : k_engines) {
        if (e.name && !(e.unbuilt_reason && e.unbuilt_reason())) {
            names.emplace_back(e.name);
        }
    }
    return names;
}

std::vector<std::string> engine_unbuilt_names() {
    std::vector<std::string> names;
    for (const auto & e : k_engines) {
        if (e.name && e.unbuilt_reason && e.unbuilt_reason()) {
            names.emplace_back(e.name);
        }
    }
    return names;
}

std::string engine_unbuilt_reason(const std::string & name) {
    for (const auto & e : k_engines) {
        if (e.name && name == e.name && e.unbuilt_reason) {
            const char * why = e.unbuilt_reason();
            return why ? why : "";
        }
    }
    return "";
}

std::unique_ptr<engine> engine_create(const std::string & name, const std::string & weights_dir,
                                      const engine_options & opts) {
    for (const auto & e : k_engines) {
        if (e.name && name == e.name) {
            return e.create(weights_dir, opts);
        }
    }
    std::string known;
    for (const auto & n : engine_names()) {
        known += (known.empty() ? "" : ", ") + n;
    }
    throw error("engine_create: unknown engine '" + name + "'; this sidecar was built with: " +
                (known.empty() ? "(none)" : known));
}

}  // namespace rfdetr
