#include "server/listen.h"

#include "common/error.h"

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

namespace rfdetr {

namespace {

std::string errno_str(int e) {
    return std::strerror(e);
}

// mkdir -p with 0700 for every directory we create (appended to `created`); existing ones keep their mode.
void make_dirs(const std::string & dir, std::vector<std::string> & created) {
    if (dir.empty()) {
        return;
    }
    struct stat st{};
    if (stat(dir.c_str(), &st) == 0) {
        if (!S_ISDIR(st.st_mode)) {
            throw error("listener_open: '" + dir + "' exists and is not a directory; choose another --socket");
        }
        return;
    }
    const auto slash = dir.find_last_of('/');
    if (slash != std::string::npos && slash > 0) {
        make_dirs(dir.substr(0, slash), created);
    }
    if (mkdir(dir.c_str(), 0700) != 0) {
        if (errno == EEXIST) {
            return;  // made by someone else meanwhile: not ours to remove
        }
        throw error("listener_open: cannot create socket directory '" + dir + "': " + errno_str(errno) +
                    "; create it (mode 0700) or choose another --socket");
    }
    created.push_back(dir);
    chmod(dir.c_str(), 0700);  // mkdir honours the umask; the directory must be exactly 0700
}

listener from_systemd() {
    listener l;
    l.fd = 3;  // SD_LISTEN_FDS_START
    int       type = 0;
    socklen_t tl   = sizeof(type);
    sockaddr_un addr{};
    socklen_t   al = sizeof(addr);
    if (getsockopt(l.fd, SOL_SOCKET, SO_TYPE, &type, &tl) != 0 || type != SOCK_STREAM ||
        getsockname(l.fd, reinterpret_cast<sockaddr *>(&addr), &al) != 0 || addr.sun_family != AF_UNIX) {
        throw error("listener_open: LISTEN_FDS passed fd 3, which is not a Unix stream socket; the sidecar serves "
                    "only Unix sockets (never TCP): set ListenStream=/path/to.sock in the .socket unit");
    }
    int acc = 0;
    tl      = sizeof(acc);
    if (getsockopt(l.fd, SOL_SOCKET, SO_ACCEPTCONN, &acc, &tl) != 0 || !acc) {
        throw error("listener_open: the socket passed as fd 3 is not listening; check the .socket unit");
    }
    fcntl(l.fd, F_SETFD, FD_CLOEXEC);
    fcntl(l.fd, F_SETFL, fcntl(l.fd, F_GETFL) | O_NONBLOCK);
    l.path  = al > offsetof(sockaddr_un, sun_path) && addr.sun_path[0] ? addr.sun_path : "(systemd socket, fd 3)";
    l.owned = false;  // systemd owns the file; it must survive our restarts
    unsetenv("LISTEN_PID");
    unsetenv("LISTEN_FDS");
    unsetenv("LISTEN_FDNAMES");
    return l;
}

}  // namespace

listener listener_open(const std::string & socket_path) {
    const char * lpid = std::getenv("LISTEN_PID");
    const char * lfds = std::getenv("LISTEN_FDS");
    if (lpid && lfds && std::strtoll(lpid, nullptr, 10) == static_cast<long long>(getpid())) {
        if (std::strtol(lfds, nullptr, 10) != 1) {
            throw error(std::string("listener_open: LISTEN_FDS=") + lfds +
                        "; the sidecar serves exactly one socket: give the .socket unit one ListenStream");
        }
        return from_systemd();
    }
    if (socket_path.empty()) {
        throw error("listener_open: no socket: pass --socket PATH (or RFDETR_SOCKET), or run under systemd socket activation");
    }
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    if (socket_path.size() >= sizeof(addr.sun_path)) {
        throw error("listener_open: socket path '" + socket_path + "' is " + std::to_string(socket_path.size()) +
                    " bytes; Unix socket paths must be under " + std::to_string(sizeof(addr.sun_path)) +
                    ": choose a shorter --socket");
    }
    std::memcpy(addr.sun_path, socket_path.c_str(), socket_path.size());
    std::vector<std::string> created;
    const auto               slash = socket_path.find_last_of('/');
    if (slash != std::string::npos && slash > 0) {
        make_dirs(socket_path.substr(0, slash), created);
    }
    // A start that fails after creating directories removes them again.
    struct dirs_guard {
        std::vector<std::string> & dirs;
        bool                       keep = false;
        ~dirs_guard() {
            for (auto it = dirs.rbegin(); !keep && it != dirs.rend(); ++it) {
                rmdir(it->c_str());
            }
        }
    } guard{created};

    struct stat st{};
    if (lstat(socket_path.c_str(), &st) == 0) {
        if (!S_ISSOCK(st.st_mode)) {
            throw error("listener_open: '" + socket_path + "' exists and is not a socket; remove it or choose another --socket");
        }
        // A socket file: live if something answers a connect, stale (left by a crash) if refused.
        const int probe = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
        const int rc    = connect(probe, reinterpret_cast<sockaddr *>(&addr), sizeof(addr));
        const int err   = errno;
        close(probe);
        if (rc == 0 || err == EAGAIN || err == EINPROGRESS) {
            throw error("listener_open: another process is listening on '" + socket_path +
                        "' (a running sidecar?); stop it or choose another --socket");
        }
        if (unlink(socket_path.c_str()) != 0) {
            throw error("listener_open: cannot remove the stale socket '" + socket_path + "': " + errno_str(errno));
        }
        std::fprintf(stderr, "listener_open: replaced the stale socket %s\n", socket_path.c_str());
    }

    listener l;
    l.fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (l.fd < 0) {
        throw error("listener_open: socket: " + errno_str(errno));
    }
    const mode_t old_mask = umask(0177);  // the file is born 0600: no window where others may connect
    const int    rc       = bind(l.fd, reinterpret_cast<sockaddr *>(&addr), sizeof(addr));
    const int    err      = errno;
    umask(old_mask);
    if (rc != 0) {
        close(l.fd);
        throw error("listener_open: cannot bind '" + socket_path + "': " + errno_str(err) +
                    "; check the directory's permissions or choose another --socket");
    }
    chmod(socket_path.c_str(), 0600);
    if (listen(l.fd, 64) != 0) {
        const int e = errno;
        close(l.fd);
        unlink(socket_path.c_str());
        throw error("listener_open: listen on '" + socket_path + "': " + errno_str(e));
    }
    guard.keep     = true;
    l.path         = socket_path;
    l.owned        = true;
    l.created_dirs = std::move(created);
    return l;
}

void listener_close(listener & l) {
    if (l.fd >= 0) {
        close(l.fd);
        l.fd = -1;
    }
    if (l.owned && !l.path.empty()) {
        unlink(l.path.c_str());
        l.owned = false;
    }
    for (auto it = l.created_dirs.rbegin(); it != l.created_dirs.rend(); ++it) {
        rmdir(it->c_str());  // fails harmlessly when someone put something else there
    }
    l.created_dirs.clear();
}

}  // namespace rfdetr
