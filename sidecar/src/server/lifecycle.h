// How the process is told to stop: SIGTERM/SIGINT (and parent death, delivered as SIGTERM) become a byte
// on a pipe the event loop polls.
#pragma once

#include <string>
#include <sys/types.h>

namespace rfdetr {

// Installs the handlers and returns the pipe's read end, or -1 with `error` set. With `exit_with_parent`,
// the parent's death sends SIGTERM; if the parent (`parent_at_start`) is already gone, fails.
int  stop_signals_install(bool exit_with_parent, pid_t parent_at_start, std::string & error);
void stop_signals_close();

}  // namespace rfdetr
