// One client connection's socket I/O: reading frames (u32 length + payload) without blocking, bounding a
// frame by the protocol's cap before allocating it, and queueing replies for writing. Knows nothing of ops.
#pragma once

#include "server/frame-pool.h"
#include "server/shm.h"

#include <chrono>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace rfdetr {

struct connection {
    int      fd     = -1;
    uint64_t serial = 0;

    uint8_t     header[4]   = {0, 0, 0, 0};
    size_t      header_got  = 0;
    frame_bytes payload;
    size_t      payload_got = 0;
    bool        in_payload  = false;
    // When the last byte of a frame still incomplete arrived: a frame stalled past the read timeout ends
    // the connection. Between frames there is no timeout.
    std::chrono::steady_clock::time_point last_read{};

    std::unique_ptr<shm_slots> shm;  // after shm_attach: this connection's slot files

    std::vector<uint8_t> out;
    size_t               out_off         = 0;
    bool                 close_after_out = false;  // after a framing error: stop reading, flush the error, close
    bool                 dead            = false;  // finished; removed by the event loop outside per-connection code

    bool mid_frame() const { return header_got > 0 || in_payload; }
    bool output_pending() const { return out_off < out.size(); }
};

// Reads what is available and passes each complete payload to `on_frame`. False when the connection is
// finished (EOF, a socket error, or flushed after an E_FRAME).
// Payload buffers come from `pool`.
bool connection_read(connection & c, frame_pool & pool, const std::function<void(connection &, frame_bytes)> & on_frame);

// Writes what the socket takes now; false when the connection is finished.
bool connection_flush(connection & c);

// Appends a frame and writes what the socket takes; marks the connection dead when it is broken.
void connection_send(connection & c, const std::vector<uint8_t> & frame);

// Queues E_FRAME (id 0) with `text`, stops reading; the connection closes once the error is written.
void connection_frame_error(connection & c, const std::string & text);

// For a stalled partial frame: the E_FRAME text naming what arrived, or "" when `c` is not mid-frame.
std::string connection_stall_text(const connection & c, int timeout_ms);

}  // namespace rfdetr
