#include "server/priority.h"

#include <nlohmann/json.hpp>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <dirent.h>
#include <fstream>
#include <sys/resource.h>
#include <unistd.h>

namespace rfdetr {

namespace {

bool autogroup_enabled() {
    std::ifstream f("/proc/sys/kernel/sched_autogroup_enabled");
    int           v = 0;
    return f && (f >> v) && v == 1;
}

std::string why(int err) {
    if (err == EPERM || err == EACCES) {
        return std::string(std::strerror(err)) +
               ": raising a priority needs CAP_SYS_NICE (root, systemd Nice=, docker --cap-add SYS_NICE) or "
               "RLIMIT_NICE (ulimit -e) of at least 20 - N";
    }
    return std::strerror(err);
}

}  // namespace

priority_result priority_raise(int requested) {
    priority_result r;
    r.requested = requested;
    errno       = 0;
    r.nice      = getpriority(PRIO_PROCESS, 0);
    if (requested == 0) {
        r.autogroup = "not requested";
        return r;
    }
    // Linux: PRIO_PROCESS with 0 is the calling thread; the threads it starts later inherit its value. A
    // thread a library's static initialiser started before main() is set by its id (/proc/self/task).
    if (setpriority(PRIO_PROCESS, 0, requested) == 0) {
        r.applied = true;
        if (DIR * d = opendir("/proc/self/task")) {
            while (const dirent * e = readdir(d)) {
                const int tid = std::atoi(e->d_name);
                if (tid > 0 && tid != static_cast<int>(gettid()) &&
                    setpriority(PRIO_PROCESS, static_cast<id_t>(tid), requested) != 0 && errno != ESRCH) {
                    r.applied = false;
                    r.note    = "thread " + std::to_string(tid) + ": setpriority(" + std::to_string(requested) +
                             "): " + why(errno);
                }
            }
            closedir(d);
        }
    } else {
        r.note = "setpriority(" + std::to_string(requested) + "): " + why(errno);
    }
    errno  = 0;
    r.nice = getpriority(PRIO_PROCESS, 0);

    // With autogroup scheduling the CPU is first shared between sessions. A sidecar that leads a session of its
    // own (started by hand, by an older server, or as a systemd unit) outranks other sessions only by its
    // autogroup's nice; one that rfdetr serve started shares the server's session (--own-process-group), where
    // the thread nice values above already order its threads against the server's, and the session's
    // autogroup, the server's too, is left alone ("not a session leader").
    if (!autogroup_enabled()) {
        r.autogroup = "off";
    } else if (getsid(0) != getpid()) {
        r.autogroup = "not a session leader";
    } else {
        std::FILE * f  = std::fopen("/proc/self/autogroup", "w");
        int         ok = f ? std::fprintf(f, "%d", requested) : -1;
        int         e  = errno;
        if (f && std::fclose(f) != 0) {
            ok = -1;
            e  = errno;
        }
        r.autogroup = ok > 0 ? "applied" : "/proc/self/autogroup: " + why(e);
    }
    if (!r.applied || r.autogroup.rfind("/proc", 0) == 0) {
        std::fprintf(stderr,
                     "rfdetr-sidecar: --nice %d not applied (running at nice %d; autogroup: %s)%s%s; carrying on\n",
                     requested, r.nice, r.autogroup.c_str(), r.note.empty() ? "" : ": ", r.note.c_str());
    }
    return r;
}

std::string priority_json(const priority_result & r) {
    nlohmann::json j = {
        {"requested", r.requested},
        {"nice", r.nice},
        {"applied", r.applied},
        {"autogroup", r.autogroup},
    };
    if (!r.note.empty()) {
        j["note"] = r.note;
    }
    return j.dump();
}

}  // namespace rfdetr
