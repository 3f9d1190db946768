// The listening Unix socket: a systemd-passed fd 3 (LISTEN_FDS) or a path we create. Never TCP.
#pragma once

#include <string>
#include <vector>

namespace rfdetr {

struct listener {
    int         fd = -1;
    std::string path;          // for the READY line and logs
    bool        owned = false;  // true: we created the file and unlink it at exit
    // Directories listener_open created for the socket (outermost first); removed at exit when empty, so a
    // stop leaves nothing behind that was not there before.
    std::vector<std::string> created_dirs;
};

// Throws rfdetr::error saying what failed and what to do (a live socket, a non-socket file in the way,
// a path too long, a passed fd that is not a Unix stream socket).
listener listener_open(const std::string & socket_path);

// Closes the fd, removes the socket file when we created it, then the directories we created (if empty).
void listener_close(listener & l);

}  // namespace rfdetr
