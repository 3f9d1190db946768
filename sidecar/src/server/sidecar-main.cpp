// The process's main flow: flags -> stop signals -> listener -> engine load + warm-up -> READY -> serve ->
// clean stop. Startup failures exit 1 with one line that says what to fix; usage errors exit 2.
#include "protocol/protocol.h"
#include "server/event-loop.h"
#include "server/lifecycle.h"
#include "server/listen.h"
#include "server/notify.h"
#include "server/options.h"
#include "server/priority.h"
#include "server/server.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <unistd.h>

#ifndef RFDETR_SIDECAR_VERSION
#define RFDETR_SIDECAR_VERSION "0.0.0"
#endif

namespace rfdetr {

namespace {

using clock_type = std::chrono::steady_clock;

double ms_since(clock_type::time_point t0) {
    return std::chrono::duration<double, std::milli>(clock_type::now() - t0).count();
}

const char * getenv_fn(const char * name) {
    return std::getenv(name);
}

void fail_line(const std::string & what) {
    std::fprintf(stderr, "rfdetr-sidecar: %s\n", what.c_str());
}

// Moves stdout to a private, close-on-exec descriptor returned as a stream, and makes fd 1 a copy of stderr.
std::FILE * ready_channel_take(std::string & err) {
    std::fflush(stdout);
    const int saved = fcntl(STDOUT_FILENO, F_DUPFD_CLOEXEC, 3);
    if (saved < 0 || dup2(STDERR_FILENO, STDOUT_FILENO) < 0) {
        err = std::string("cannot move stdout to stderr for the READY channel: ") + std::strerror(errno);
        return nullptr;
    }
    std::FILE * f = fdopen(saved, "w");
    if (!f) {
        err = std::string("cannot open the READY channel: ") + std::strerror(errno);
    }
    return f;
}

// Two forwards on a fixed synthetic input (page-faults buffers, fills caches; TT captures its trace).
double warm_up(engine & eng, int input_size) {
    std::vector<float> pixels(static_cast<size_t>(k_input_channels) * input_size * input_size);
    for (size_t i = 0; i < pixels.size(); i++) {
        pixels[i] = static_cast<float>(std::sin(0.001 * static_cast<double>(i)));
    }
    output_buffers outputs(eng.outputs());
    const auto     t0 = clock_type::now();
    for (int i = 0; i < 2; i++) {
        engine_forward(eng, pixels.data(), outputs);
    }
    return ms_since(t0);
}

// --list-engines: what the CLI checks --engine and --precision against and `rfdetr info` lists (one JSON line
// on stdout): every engine of the table, the built ones first, each with its facts; an unbuilt one with why.
std::string engines_json(const engine_table & engines) {
    auto list = nlohmann::ordered_json::array();
    for (const bool built : {true, false}) {
        for (const auto & e : engines) {
            const std::string why = engine_unbuilt_reason(e);
            if (why.empty() != built) {
                continue;
            }
            nlohmann::ordered_json j = {{"name", e.name},
                                        {"built", built},
                                        {"precisions", e.precisions},
                                        {"default_precision", e.precisions.front()},
                                        {"host_cores", e.host_cores}};
            if (!built) {
                j["unbuilt_reason"] = why;
            }
            list.push_back(std::move(j));
        }
    }
    return nlohmann::ordered_json{{"engines", list}}.dump();
}

}  // namespace

int sidecar_main(int argc, char ** argv, const engine_table & engines) {
    const pid_t parent_at_start = getppid();

    sidecar_options opts;
    std::string     err;
    switch (options_parse(argc, argv, getenv_fn, opts, err)) {
        case options_status::OPTIONS_HELP: std::fputs(options_help(engine_names(engines)).c_str(), stdout); return 0;
        case options_status::OPTIONS_VERSION:
            std::printf("rfdetr-sidecar %s (protocol %u)\n", RFDETR_SIDECAR_VERSION, k_protocol_version);
            return 0;
        case options_status::OPTIONS_LIST_ENGINES: std::printf("%s\n", engines_json(engines).c_str()); return 0;
        case options_status::OPTIONS_USAGE_ERROR: fail_line(err + " (see rfdetr-sidecar --help)"); return 2;
        case options_status::OPTIONS_OK: break;
    }
    // Before anything starts (a process group, threads, the READY channel): the engine's setup may re-execute the
    // process with the same arguments (registry.h, process_setup).
    if (const engine_entry * e = engine_find(engines, opts.engine); e && e->process_setup) {
        e->process_setup(argv);
    }
    // First, so that a terminal's Ctrl-C meant for the parent finds this process in a group of its own as soon
    // as possible. The parent does not spawn it in a new session (setsid): sessions are the kernel's autogroups,
    // and a sidecar leading its own would get half the CPU against the parent's whole session whatever the
    // threads' nice values (priority.cpp; SERVING.md, "CPU priority of the engine").
    if (opts.own_process_group && setpgid(0, 0) != 0) {
        std::fprintf(stderr, "rfdetr-sidecar: --own-process-group: setpgid: %s; carrying on in the parent's group\n",
                     std::strerror(errno));
    }
    // Before any thread exists (the engine's pool, the pipeline): they inherit the main thread's nice value.
    priority_result prio = priority_raise(opts.nice);
    // --load-nice only where --nice was applied: coming back from a higher nice needs that privilege.
    struct {
        int         requested = 0;
        bool        applied   = false;
        const char * note     = "";
    } load_nice;
    if (opts.load_nice > 0) {
        if (prio.applied && opts.nice < 0) {
            load_nice.requested = opts.load_nice;
        } else {
            load_nice.note = "not applied: --nice was not applied, and going back from a higher nice needs its privilege";
        }
    }

    // Stdout is the READY channel, but engine libraries log there too (ttnn's logger writes to stdout): keep
    // the channel on a saved descriptor and point stdout at stderr, so their lines land with the other logs.
    std::FILE * ready_out = ready_channel_take(err);
    if (!ready_out) {
        fail_line(err);
        return 1;
    }

    // The engine's registry row decides, before any weights are read: a name nobody knows and a precision
    // the engine lacks are usage errors; a known engine this build lacks is a startup failure saying how to
    // build it.
    const engine_entry * entry = engine_find(engines, opts.engine);
    if (!entry) {
        std::string known;
        for (const auto & n : engine_names(engines)) {
            known += (known.empty() ? "" : ", ") + n;
        }
        fail_line("--engine '" + opts.engine + "' is not built into this sidecar; built: " +
                  (known.empty() ? "(none)" : known) + ". Choose one of those or rebuild with that engine.");
        return 2;
    }
    if (opts.precision.empty()) {
        opts.precision = entry->precisions.front();
    } else if (const std::string perr = engine_precision_error(*entry, opts.precision); !perr.empty()) {
        fail_line(perr + " (rfdetr-sidecar --list-engines names each engine's precisions)");
        return 2;
    }
    if (const std::string why = engine_unbuilt_reason(*entry); !why.empty()) {
        fail_line(why);
        return 1;
    }

    const int signal_fd = stop_signals_install(opts.exit_with_parent, parent_at_start, err);
    if (signal_fd < 0) {
        fail_line(err);
        return 1;
    }

    listener lst;
    try {
        lst = listener_open(opts.socket_path);
    } catch (const std::exception & e) {
        fail_line(std::string("cannot listen: ") + e.what());
        return 1;
    }

    // The loaded variant's input side (engine::input_size: Base 560, Nano 384, ...); the pipeline (its
    // resize) and the hello take the size from here.
    int                     input_size = 0;
    std::unique_ptr<engine> eng;
    double                  load_ms   = 0.0;
    double                  warmup_ms = 0.0;
    try {
        engine_options eo;
        eo.threads   = opts.threads;
        eo.device_id = opts.device_id;
        eo.precision = opts.precision;
        eo.eager     = opts.eager;
        // --load-nice: the load and warm-up yield the cores to the sidecars already serving; the threads they
        // start inherit it, and priority_raise below sets every thread (and the autogroup) back.
        if (load_nice.requested > 0) {
            load_nice.applied = priority_raise(load_nice.requested).applied;
        }
        const auto t_load = clock_type::now();
        eng               = entry->create(opts.weights_dir, eo);
        load_ms           = ms_since(t_load);
        input_size        = eng->input_size();
        warmup_ms         = warm_up(*eng, input_size);
        if (load_nice.requested > 0) {
            prio = priority_raise(opts.nice);
        }
    } catch (const std::exception & e) {
        listener_close(lst);
        fail_line("engine '" + opts.engine + "' failed to start from '" + opts.weights_dir + "': " + e.what() +
                  " (no other engine is tried; fix the cause or choose another --engine)");
        return 1;
    }

    nlohmann::json ready = {
        {"engine", eng->name()},
        {"device", eng->device()},
        {"protocol_version", k_protocol_version},
        {"sidecar_version", RFDETR_SIDECAR_VERSION},
        {"load_ms", std::round(load_ms * 10.0) / 10.0},
        {"warmup_ms", std::round(warmup_ms * 10.0) / 10.0},
        {"socket", lst.path},
        {"pid", static_cast<long long>(getpid())},
        {"nice", nlohmann::json::parse(priority_json(prio))},
        {"load_nice", {{"requested", opts.load_nice}, {"applied", load_nice.applied}, {"note", load_nice.note}}},
    };
    std::fprintf(ready_out, "READY %s\n", ready.dump().c_str());
    std::fflush(ready_out);
    notify_send("READY=1");
    std::fprintf(stderr, "sidecar_main: engine %s on %s ready on %s (load %.1f ms, warm-up %.1f ms)\n",
                 eng->name().c_str(), eng->device().c_str(), lst.path.c_str(), load_ms, warmup_ms);

    {
        event_loop loop(*eng, *entry, input_size, lst, signal_fd, opts.frame_timeout_ms);
        loop.run();
    }  // joins the pipeline after the forward in progress
    eng.reset();
    listener_close(lst);
    stop_signals_close();
    std::fprintf(stderr, "sidecar_main: stopped cleanly\n");
    return 0;
}

}  // namespace rfdetr
