#include "server/connection.h"

#include "protocol/protocol.h"

#include <cerrno>
#include <cstdio>
#include <new>
#include <sys/socket.h>

namespace rfdetr {

namespace {

// Sends data[*done..n) until it is all sent or the socket is full; advances *done. False on a socket error
// (the connection is dead); a full socket (EAGAIN) is not one.
bool send_some(int fd, const uint8_t * data, size_t n, size_t * done) {
    while (*done < n) {
        const ssize_t k = send(fd, data + *done, n - *done, MSG_NOSIGNAL);
        if (k < 0) {
            if (errno == EINTR) {
                continue;
            }
            return errno == EAGAIN || errno == EWOULDBLOCK;
        }
        *done += static_cast<size_t>(k);
    }
    return true;
}

}  // namespace

bool connection_flush(connection & c) {
    if (!send_some(c.fd, c.out.data(), c.out.size(), &c.out_off)) {
        return false;
    }
    if (c.out_off < c.out.size()) {
        return true;  // the socket is full: the rest waits for it to drain
    }
    c.out.clear();
    c.out_off = 0;
    return !c.close_after_out;
}

void connection_send(connection & c, const std::vector<uint8_t> & frame) {
    size_t sent = 0;
    // Nothing queued before it: written from the frame itself, and only what the socket did not take is
    // copied into the queue (a reply is 114 KB, usually taken whole).
    if (!c.dead && !c.output_pending() && !send_some(c.fd, frame.data(), frame.size(), &sent)) {
        c.dead = true;
        return;
    }
    c.out.insert(c.out.end(), frame.begin() + static_cast<std::ptrdiff_t>(sent), frame.end());
    if (!c.dead && !connection_flush(c)) {
        c.dead = true;
    }
}

void connection_frame_error(connection & c, const std::string & text) {
    std::fprintf(stderr, "connection_frame_error: client %llu sent a malformed frame (%s); closing it\n",
                 static_cast<unsigned long long>(c.serial), text.c_str());
    std::vector<uint8_t> f;
    encode_frame(make_error_reply(0, wire_error::WIRE_ERROR_FRAME, text), f);
    c.out.insert(c.out.end(), f.begin(), f.end());
    c.close_after_out = true;
    c.header_got      = 0;
    c.in_payload      = false;
    c.payload         = frame_bytes{};
    shutdown(c.fd, SHUT_RD);
}

std::string connection_stall_text(const connection & c, int timeout_ms) {
    if (!c.mid_frame()) {
        return "";
    }
    const std::string got = c.in_payload ? std::to_string(c.payload_got) + " of " + std::to_string(c.payload.size) +
                                               " payload bytes"
                                         : std::to_string(c.header_got) + " of 4 length bytes";
    return "incomplete frame: received " + got + ", then nothing for " + std::to_string(timeout_ms) +
           " ms (--frame-timeout-ms); send each frame whole";
}

bool connection_read(connection & c, frame_pool & pool, const std::function<void(connection &, frame_bytes)> & on_frame) {
    for (;;) {
        if (c.dead) {
            return false;
        }
        if (c.close_after_out) {
            return connection_flush(c);
        }
        ssize_t n;
        if (!c.in_payload) {
            n = recv(c.fd, c.header + c.header_got, k_frame_header - c.header_got, 0);
        } else {
            n = recv(c.fd, c.payload.data.get() + c.payload_got, c.payload.size - c.payload_got, 0);
        }
        if (n == 0) {
            return false;  // EOF: the client left; the sidecar keeps serving others
        }
        if (n < 0) {
            if (errno == EAGAIN || errno == EWOULDBLOCK) {
                return true;
            }
            if (errno == EINTR) {
                continue;
            }
            return false;
        }
        c.last_read = std::chrono::steady_clock::now();
        if (!c.in_payload) {
            c.header_got += static_cast<size_t>(n);
            if (c.header_got < k_frame_header) {
                continue;
            }
            uint32_t len = 0;
            auto     r   = frame_length_check(c.header, len);
            if (r.error != wire_error::WIRE_ERROR_NONE) {
                connection_frame_error(c, r.message);  // before allocating anything for it
                continue;
            }
            try {
                c.payload = pool.take(len);
            } catch (const std::bad_alloc &) {
                connection_frame_error(c, "the sidecar cannot allocate " + std::to_string(len) +
                                              " bytes for this frame now (out of memory); retry later or send less");
                continue;
            }
            c.payload_got  = 0;
            c.in_payload   = true;
            continue;
        }
        c.payload_got += static_cast<size_t>(n);
        if (c.payload_got < c.payload.size) {
            continue;
        }
        c.in_payload = false;
        c.header_got = 0;
        on_frame(c, std::move(c.payload));
        c.payload = frame_bytes{};
    }
}

}  // namespace rfdetr
