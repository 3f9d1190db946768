// systemd's sd_notify protocol, written by hand (no libsystemd): one datagram to $NOTIFY_SOCKET.
#pragma once

#include <cstdint>

namespace rfdetr {

// Sends `state` (e.g. "READY=1") when NOTIFY_SOCKET is set; '@' paths are abstract-namespace sockets.
// Returns false (and logs) when the socket is set but the send failed; true otherwise.
bool notify_send(const char * state);

// Half of WATCHDOG_USEC in microseconds when systemd asks for watchdog pings for this process, else 0.
uint64_t notify_watchdog_interval_us();

}  // namespace rfdetr
