#include "server/notify.h"

#include <cerrno>
#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

namespace rfdetr {

bool notify_send(const char * state) {
    const char * path = std::getenv("NOTIFY_SOCKET");
    if (!path || !*path) {
        return true;
    }
    const size_t len = std::strlen(path);
    sockaddr_un  addr{};
    addr.sun_family = AF_UNIX;
    if (len >= sizeof(addr.sun_path)) {
        std::fprintf(stderr, "notify_send: NOTIFY_SOCKET '%s' is longer than %zu bytes; not notifying\n", path,
                     sizeof(addr.sun_path) - 1);
        return false;
    }
    std::memcpy(addr.sun_path, path, len);
    socklen_t addr_len = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + len);
    if (path[0] == '@') {
        addr.sun_path[0] = '\0';  // abstract namespace: no trailing NUL counted
    } else {
        addr_len += 1;
    }
    const int fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        std::fprintf(stderr, "notify_send: socket: %s\n", std::strerror(errno));
        return false;
    }
    const ssize_t n = sendto(fd, state, std::strlen(state), MSG_NOSIGNAL, reinterpret_cast<sockaddr *>(&addr), addr_len);
    const int     err = errno;
    close(fd);
    if (n < 0) {
        std::fprintf(stderr, "notify_send: sending '%s' to %s failed: %s\n", state, path, std::strerror(err));
        return false;
    }
    return true;
}

uint64_t notify_watchdog_interval_us() {
    const char * usec = std::getenv("WATCHDOG_USEC");
    if (!usec || !*usec) {
        return 0;
    }
    const char * pid = std::getenv("WATCHDOG_PID");
    if (pid && *pid && std::strtoll(pid, nullptr, 10) != static_cast<long long>(getpid())) {
        return 0;
    }
    const unsigned long long v = std::strtoull(usec, nullptr, 10);
    return v / 2;
}

}  // namespace rfdetr
