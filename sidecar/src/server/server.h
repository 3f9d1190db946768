// The rfdetr-sidecar process: flags → listener → engine load → warm-up → READY → serve → clean stop.
//
// Concurrency: one poll() thread owns every socket (accept, read, decode, write, ping, shutdown, the stop
// signals, the systemd watchdog; event-loop.h); the pipeline (pipeline.h) owns the engine and runs forwards
// one at a time from a FIFO shared by all connections, with a resize stage ahead of it for accelerator
// engines. A thread per connection would make a `ping` wait behind its own connection's forward; with the
// split, pings measure liveness of the process and are answered while a forward runs, and a slow forward is
// visible as a slow infer reply, not a dead sidecar.
#pragma once

#include "engines/registry.h"

namespace rfdetr {

// Runs the whole process over `engines` (the product's engine_registry(), or a test build's with its test
// engines added); returns the exit status (0 clean stop, 1 startup failure, 2 usage error).
int sidecar_main(int argc, char ** argv, const engine_table & engines);

}  // namespace rfdetr
