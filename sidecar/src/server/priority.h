// --nice N: the sidecar raises its own CPU priority at start, where the host permits it (CAP_SYS_NICE, or
// RLIMIT_NICE high enough), so the engine's forward threads outrank the server's decodes; not permitted is
// no failure: it is said once on stderr and in the READY line, and the sidecar carries on at its priority.
#pragma once

#include <string>

namespace rfdetr {

struct priority_result {
    int         requested = 0;     // --nice (0 = leave as started)
    int         nice      = 0;     // the process's nice after the attempt (getpriority)
    bool        applied   = false; // the process (its main thread, so every thread it starts) got `requested`
    // The autogroup (kernel.sched_autogroup_enabled = 1, the sidecar leading its session): "applied",
    // "off" (autogroup scheduling disabled or absent), "not a session leader", or why it failed.
    std::string autogroup;
    std::string note;              // why not applied; empty when applied or nothing was requested
};

// Call from the main thread before any other thread exists: threads inherit their creator's nice value.
priority_result priority_raise(int requested);

// The READY line's "nice" object: {"requested","nice","applied","autogroup","note"?}.
std::string priority_json(const priority_result & r);

}  // namespace rfdetr
