// The listening Unix socket: a systemd-passed fd 3 (LISTEN_FDS) or a path we create. Never TCP.
#pragma once

#include <string>

namespace rfdetr {

struct listener {
    int         fd = -1;
    std::string path;          // for the READY line and logs
    bool        owned = false;  // true: we created the file and unlink it at exit
};

// Throws rfdetr::error saying what failed and what to do (a live socket, a non-socket file in the way,
// a path too long, a passed fd that is not a Unix stream socket).
listener listener_open(const std::string & socket_path);

// Closes the fd and removes the socket file when we created it.
void listener_close(listener & l);

}  // namespace rfdetr
