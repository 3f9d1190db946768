#include "server/options.h"

#include <cerrno>
#include <cstdlib>
#include <cstring>

namespace rfdetr {

namespace {

bool parse_int(const std::string & s, int lo, int hi, int & out) {
    if (s.empty()) {
        return false;
    }
    char * end = nullptr;
    errno      = 0;
    long v     = std::strtol(s.c_str(), &end, 10);
    if (errno != 0 || *end != '\0' || v < lo || v > hi) {
        return false;
    }
    out = static_cast<int>(v);
    return true;
}

}  // namespace

options_status options_parse(int argc, const char * const * argv, const char * (*env)(const char *),
                             sidecar_options & out, std::string & error) {
    struct int_source {
        const char * flag;
        const char * var;
        int *        dst;
        int          lo;
        int          hi;
        const char * expect;
    };
    const int_source ints[] = {
        {"--threads", "RFDETR_THREADS", &out.threads, 0, 1024, "an integer from 0 (physical cores) to 1024"},
        {"--device-id", "TT_DEVICE_ID", &out.device_id, 0, 1023, "a device index from 0 to 1023"},
        {"--frame-timeout-ms", "RFDETR_FRAME_TIMEOUT_MS", &out.frame_timeout_ms, 1, 3600000,
         "a time in milliseconds from 1 to 3600000"},
        {"--nice", "RFDETR_NICE", &out.nice, -20, 0, "a nice value from -20 (highest priority) to 0 (as started)"},
        {"--load-nice", "RFDETR_LOAD_NICE", &out.load_nice, 0, 19, "a nice value from 0 (off) to 19 (lowest priority)"},
    };
    struct str_source {
        const char *  flag;
        const char *  var;
        std::string * dst;
    };
    const str_source strs[] = {
        {"--socket", "RFDETR_SOCKET", &out.socket_path},
        {"--engine", "RFDETR_ENGINE", &out.engine},
        {"--weights", "TT_RF_DETR_WEIGHTS", &out.weights_dir},
        {"--precision", nullptr, &out.precision},
    };

    // Environment first, so flags win.
    for (const auto & s : strs) {
        const char * v = s.var ? env(s.var) : nullptr;
        if (v && *v) {
            *s.dst = v;
        }
    }
    for (const auto & s : ints) {
        const char * v = env(s.var);
        if (v && *v && !parse_int(v, s.lo, s.hi, *s.dst)) {
            error = std::string("environment variable ") + s.var + "='" + v + "' is not " + s.expect;
            return options_status::OPTIONS_USAGE_ERROR;
        }
    }

    for (int i = 1; i < argc; i++) {
        std::string arg = argv[i];
        std::string value;
        bool        has_inline = false;
        const auto  eq         = arg.find('=');
        if (arg.rfind("--", 0) == 0 && eq != std::string::npos) {
            value      = arg.substr(eq + 1);
            arg        = arg.substr(0, eq);
            has_inline = true;
        }
        if (arg == "--help" || arg == "-h") {
            return options_status::OPTIONS_HELP;
        }
        if (arg == "--version") {
            return options_status::OPTIONS_VERSION;
        }
        if (arg == "--list-engines") {
            return options_status::OPTIONS_LIST_ENGINES;
        }
        if (arg == "--exit-with-parent" || arg == "--eager" || arg == "--own-process-group") {
            if (has_inline) {
                error = arg + " takes no value, got '" + value + "'";
                return options_status::OPTIONS_USAGE_ERROR;
            }
            (arg == "--eager" ? out.eager : arg == "--own-process-group" ? out.own_process_group : out.exit_with_parent) = true;
            continue;
        }
        const str_source * sflag = nullptr;
        const int_source * iflag = nullptr;
        for (const auto & s : strs) {
            if (arg == s.flag) {
                sflag = &s;
            }
        }
        for (const auto & s : ints) {
            if (arg == s.flag) {
                iflag = &s;
            }
        }
        if (!sflag && !iflag) {
            error = "unknown flag '" + arg + "'";
            return options_status::OPTIONS_USAGE_ERROR;
        }
        if (!has_inline) {
            if (i + 1 >= argc) {
                error = arg + " needs a value";
                return options_status::OPTIONS_USAGE_ERROR;
            }
            value = argv[++i];
        }
        if (sflag) {
            if (value.empty()) {
                error = arg + " needs a non-empty value";
                return options_status::OPTIONS_USAGE_ERROR;
            }
            *sflag->dst = value;
        } else if (!parse_int(value, iflag->lo, iflag->hi, *iflag->dst)) {
            error = arg + " '" + value + "' is not " + iflag->expect;
            return options_status::OPTIONS_USAGE_ERROR;
        }
    }
    if (out.weights_dir.empty()) {
        error = "--weights DIR is required (a directory with model.safetensors and config.json; or set TT_RF_DETR_WEIGHTS)";
        return options_status::OPTIONS_USAGE_ERROR;
    }
    return options_status::OPTIONS_OK;
}

std::string options_help(const std::vector<std::string> & engines) {
    std::string names;
    for (const auto & n : engines) {
        names += (names.empty() ? "" : "|") + n;
    }
    return "usage: rfdetr-sidecar --socket PATH --weights DIR [options]\n"
           "\n"
           "Serves RF-DETR forwards over a Unix socket (protocol: sidecar/PROTOCOL.md): any variant of the\n"
           "detection family (base, nano, small, medium, large, large_deprecated), read from the checkpoint's\n"
           "tensors, and RF-DETR Seg (seg-nano ... seg-2xlarge) on cpu, tt-host and tt (task segment: mask\n"
           "logits of the queries a request's select picks). Prints one 'READY {json}' line on stdout when\n"
           "warmed up; logs go to stderr.\n"
           "\n"
           "  --socket PATH        Unix socket to listen on (env RFDETR_SOCKET); created 0600, its directory\n"
           "                       0700 if missing. Not needed under systemd socket activation (LISTEN_FDS).\n"
           "  --engine NAME        engine to run (env RFDETR_ENGINE; default cpu; built: " +
           (names.empty() ? std::string("none") : names) +
           ")\n"
           "  --weights DIR        model.safetensors + config.json (env TT_RF_DETR_WEIGHTS)\n"
           "  --threads N          CPU threads, 0 = physical cores (env RFDETR_THREADS; default 0)\n"
           "  --device-id N        accelerator index (env TT_DEVICE_ID; default 0)\n"
           "  --precision P        one of the engine's precisions (default: its first; --list-engines names them)\n"
           "  --frame-timeout-ms N a client that stops for N ms in the middle of a frame gets E_FRAME and is\n"
           "                       closed; idle clients between frames are never timed out (env\n"
           "                       RFDETR_FRAME_TIMEOUT_MS; default 30000)\n"
           "  --nice N             -20..0: at start, the process (every thread) at nice N and, when it leads its\n"
           "                       session, its autogroup too; needs CAP_SYS_NICE or RLIMIT_NICE, else said\n"
           "                       once on stderr and in READY's \"nice\", and it carries on (env RFDETR_NICE;\n"
           "                       default 0 = as started)\n"
           "  --load-nice N        0..19: load the checkpoint and warm up at nice N (every thread, and the\n"
           "                       autogroup), then go back to --nice's value before READY; only when --nice was\n"
           "                       applied (going back needs the same privilege), else ignored and said in READY's\n"
           "                       \"load_nice\"; for a server swapping in a model while others serve\n"
           "                       (env RFDETR_LOAD_NICE; default 0 = off)\n"
           "  --exit-with-parent   exit (cleanly) when the parent process dies\n"
           "  --own-process-group  at start, a process group of its own in its parent's session: a terminal's\n"
           "                       Ctrl-C reaches the parent only, while the CPU scheduler's autogroup (one per\n"
           "                       session) stays the parent's, so nice values order the engine's threads against\n"
           "                       the parent's (how rfdetr serve and detect start it)\n"
           "  --eager              accelerator engines: run op by op, no trace capture (debugging)\n"
           "  --list-engines       print the engines as JSON and exit: {\"engines\": [{\"name\", \"built\",\n"
           "                       \"precisions\", \"default_precision\", \"host_cores\", \"unbuilt_reason\"}]}, the built\n"
           "                       ones first, an unbuilt one with how to build it\n"
           "  --help, --version\n"
           "\n"
           "Flags beat environment variables. Exit status: 0 clean stop, 1 startup failure, 2 usage error.\n";
}

}  // namespace rfdetr
