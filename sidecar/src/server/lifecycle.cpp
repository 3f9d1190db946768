#include "server/lifecycle.h"

#include <cerrno>
#include <csignal>
#include <cstring>
#include <fcntl.h>
#include <sys/prctl.h>
#include <unistd.h>

namespace rfdetr {

namespace {

// A handler rather than a blocked mask + signalfd: libraries may start threads before main() (OpenBLAS
// does, in a constructor) and those threads would not have the signal blocked, so the default action
// (terminate) could win. A handler runs on any thread and only writes one byte (async-signal-safe).
int g_signal_pipe[2] = {-1, -1};

extern "C" void on_stop_signal(int sig) {
    const int           saved = errno;
    const unsigned char b     = static_cast<unsigned char>(sig);
    (void) !write(g_signal_pipe[1], &b, 1);
    errno = saved;
}

}  // namespace

int stop_signals_install(bool exit_with_parent, pid_t parent_at_start, std::string & error) {
    if (pipe2(g_signal_pipe, O_CLOEXEC | O_NONBLOCK) != 0) {
        error = std::string("cannot create the signal pipe: ") + std::strerror(errno);
        return -1;
    }
    struct sigaction sa{};
    sa.sa_handler = on_stop_signal;
    sa.sa_flags   = SA_RESTART;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGTERM, &sa, nullptr);
    sigaction(SIGINT, &sa, nullptr);
    std::signal(SIGPIPE, SIG_IGN);
    if (exit_with_parent) {
        prctl(PR_SET_PDEATHSIG, SIGTERM);
        if (getppid() != parent_at_start) {
            error = "the parent process exited before the sidecar started (--exit-with-parent); not starting";
            return -1;
        }
    }
    return g_signal_pipe[0];
}

void stop_signals_close() {
    for (int & fd : g_signal_pipe) {
        if (fd >= 0) {
            close(fd);
            fd = -1;
        }
    }
}

}  // namespace rfdetr
