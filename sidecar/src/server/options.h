// rfdetr-sidecar command line: flags beat environment variables beat defaults; bad input exits 2 naming the flag.
#pragma once

#include <string>
#include <vector>

namespace rfdetr {

struct sidecar_options {
    std::string socket_path;       // --socket / RFDETR_SOCKET (not needed under socket activation)
    std::string engine = "cpu";    // --engine / RFDETR_ENGINE
    std::string weights_dir;       // --weights / TT_RF_DETR_WEIGHTS
    int         threads   = 0;     // --threads / RFDETR_THREADS (0 = physical cores)
    int         device_id = 0;     // --device-id / TT_DEVICE_ID
    std::string precision;         // --precision: one of the engine's (registry.h); "" = the engine's default
    bool        exit_with_parent = false;
    bool        own_process_group = false;  // --own-process-group: setpgid(0, 0) at start, same session
    bool        eager            = false;  // --eager: accelerator engines run op by op, no trace (debugging)
    int         frame_timeout_ms = 30000;  // --frame-timeout-ms / RFDETR_FRAME_TIMEOUT_MS: a half-sent frame's stall limit
    int         nice             = 0;      // --nice / RFDETR_NICE: -20..0, raised at start when permitted (priority.h)
    int         load_nice        = 0;      // --load-nice: 0..19, the nice of the load and warm-up when --nice applied
};

enum class options_status {
    OPTIONS_OK,
    OPTIONS_HELP,
    OPTIONS_VERSION,
    OPTIONS_LIST_ENGINES,
    OPTIONS_USAGE_ERROR,
};

// Parses argv (argv[0] skipped) over the environment `env` (a getenv-like lookup). On
// OPTIONS_USAGE_ERROR, `error` names the flag or variable, the bad value and what is expected.
options_status options_parse(int argc, const char * const * argv, const char * (*env)(const char *),
                             sidecar_options & out, std::string & error);

std::string options_help(const std::vector<std::string> & engines);

}  // namespace rfdetr
