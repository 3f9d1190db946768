// The rfdetr-sidecar process: flags → listener → engine load → warm-up → READY → serve → clean stop.
//
// Concurrency: one poll() thread owns every socket (accept, read, decode, write, ping, shutdown, the stop
// signals, the systemd watchdog; event-loop.h); the pipeline (pipeline.h) owns the engine and runs forwards
// one at a time from a FIFO shared by all connections, with a resize stage ahead of it for accelerator
// engines. A thread per connection would make a `ping` wait behind its own connection's forward; with the
// split, pings measure liveness of the process and are answered while a forward runs, and a slow forward is
// visible as a slow infer reply, not a dead sidecar.
#pragma once

#include "engines/engine.h"

#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace rfdetr {

struct engine_factory {
    std::function<std::unique_ptr<engine>(const std::string &, const std::string &, const engine_options &)> create;
    std::function<std::vector<std::string>()> names;
    // Why a known engine is not in names() (how to build it); may be empty. Optional.
    std::function<std::string(const std::string &)> unbuilt_reason;
    // The engines this project knows that are not in names(), for --list-engines. Optional.
    std::function<std::vector<std::string>()> unbuilt_names;
};

// The factory built into the product binary: the engine registry (engines/registry.cpp).
engine_factory engine_factory_default();

// Runs the whole process; returns the exit status (0 clean stop, 1 startup failure, 2 usage error).
int sidecar_main(int argc, char ** argv, const engine_factory & factory);

}  // namespace rfdetr
