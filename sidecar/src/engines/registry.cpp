// The table of engines this project knows: per name its precisions, whether it computes on the host's
// cores, its factory, and why a build may lack it. The one place that knows them all.
#include "engines/registry.h"

#include "engines/cpu/cpu-engine.h"
#include "engines/tt/openblas-core.h"
#include "engines/tt/tt-engine.h"

namespace rfdetr {

const engine_table & engine_registry() {
    // cpu: fp32, or int8 or bf16 weight GEMMs (cpu-engine.cpp; bf16 refused on a CPU without bf16 instructions). tt-host: fp32, or bf16 = the device plan's numerics
    // modelled on the host (tt-ops-host.cpp). tt: the card runs only the device precision plan (tt-graph.h,
    // "device": bf16 activations with fp32 weights, accumulation and residual stream), so bf16 alone.
    static const engine_table table = {
        {"cpu", {"fp32", "int8", "bf16"}, true, cpu_engine_create, nullptr, cpu_precision_refusal},
        {"tt", {"bf16"}, false, tt_engine_create, tt_engine_unbuilt_reason},
        {"tt-host", {"fp32", "bf16"}, true, tt_host_engine_create, nullptr, nullptr, openblas_process_setup},
    };
    return table;
}

const engine_entry * engine_find(const engine_table & table, const std::string & name) {
    for (const auto & e : table) {
        if (e.name == name) {
            return &e;
        }
    }
    return nullptr;
}

std::string engine_unbuilt_reason(const engine_entry & e) {
    const char * why = e.unbuilt_reason ? e.unbuilt_reason() : nullptr;
    return why ? why : "";
}

std::string engine_precision_error(const engine_entry & e, const std::string & precision) {
    std::string have;
    for (const auto & p : e.precisions) {
        if (p == precision) {
            return e.precision_refusal ? e.precision_refusal(precision) : "";
        }
        have += (have.empty() ? "" : ", ") + p;
    }
    return "engine '" + e.name + "' cannot run --precision '" + precision + "'; it runs " + have + " (default " +
           e.precisions.front() + "): pass one of those, or choose another --engine";
}

std::vector<std::string> engine_names(const engine_table & table) {
    std::vector<std::string> names;
    for (const auto & e : table) {
        if (engine_unbuilt_reason(e).empty()) {
            names.push_back(e.name);
        }
    }
    return names;
}

std::vector<std::string> engine_names() {
    return engine_names(engine_registry());
}

std::string engine_unbuilt_reason(const std::string & name) {
    const engine_entry * e = engine_find(engine_registry(), name);
    return e ? engine_unbuilt_reason(*e) : "";
}

std::unique_ptr<engine> engine_create(const std::string & name, const std::string & weights_dir,
                                      const engine_options & opts) {
    const engine_entry * e = engine_find(engine_registry(), name);
    if (!e) {
        std::string known;
        for (const auto & n : engine_names()) {
            known += (known.empty() ? "" : ", ") + n;
        }
        throw error("engine_create: unknown engine '" + name + "'; this sidecar was built with: " +
                    (known.empty() ? "(none)" : known));
    }
    engine_options o = opts;
    if (o.precision.empty()) {
        o.precision = e->precisions.front();
    }
    if (const std::string err = engine_precision_error(*e, o.precision); !err.empty()) {
        throw error("engine_create: " + err);
    }
    if (const std::string why = engine_unbuilt_reason(*e); !why.empty()) {
        throw error(why);
    }
    return e->create(weights_dir, o);
}

}  // namespace rfdetr
