#include "server/event-loop.h"

#include "protocol/protocol.h"
#include "server/notify.h"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

namespace rfdetr {

namespace {
// Frames of at least 1 MB (images, pixel_values) reuse their buffers, up to 256 MB kept while idle: one
// 8192x8192 frame, or seven 4000x3000 ones.
constexpr size_t k_pool_min_bytes  = 1u << 20;
constexpr size_t k_pool_keep_bytes = 256u << 20;
}  // namespace

event_loop::event_loop(engine & eng, const engine_entry & entry, int input_size, listener & lst, int signal_fd,
                       int frame_timeout_ms)
    : lst_(lst),
      signal_fd_(signal_fd),
      wake_fd_(eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)),
      frame_timeout_ms_(frame_timeout_ms),
      shm_(shm_dir_open(lst.path)),
      pool_(k_pool_min_bytes, k_pool_keep_bytes),
      pipe_(eng, entry.host_cores, input_size, pool_,
            [this] {
                const uint64_t one = 1;
                (void) !write(wake_fd_, &one, sizeof(one));
            }),
      dispatch_(
          pipe_, input_size, shm_, [this](uint64_t serial, const std::vector<uint8_t> & f) { send_frame(serial, f); },
          [this] { begin_stop(); }),
      hello_frame_(hello_frame(eng, entry, input_size)) {
    std::fprintf(stderr, "event_loop: %s\n",
                 pipe_.overlaps() ? "preprocess overlaps the forward (the engine does not use the host's cores)"
                                  : "preprocess runs on the forward thread (the engine uses the host's cores)");
    if (shm_.path.empty()) {
        std::fprintf(stderr, "event_loop: shared memory for frames unavailable (%s); images come in the frame\n",
                     shm_.why_not.c_str());
    } else {
        std::fprintf(stderr, "event_loop: shared memory for frames in %s\n", shm_.path.c_str());
    }
}

event_loop::~event_loop() {
    pipe_.stop();
    for (auto & kv : conns_) {
        close(kv.second.fd);
    }
    conns_.clear();  // unlinks their slot files before the directory goes
    shm_dir_close(shm_);
    close(wake_fd_);
}

bool event_loop::any_output_pending() const {
    for (const auto & kv : conns_) {
        if (kv.second.output_pending()) {
            return true;
        }
    }
    return false;
}

void event_loop::begin_stop() {
    if (stopping_) {
        return;
    }
    stopping_      = true;
    stop_deadline_ = clock_type::time_point{};  // set once the forward in progress has finished
    notify_send("STOPPING=1");
    for (const auto & k : pipe_.take_queued(0)) {
        std::vector<uint8_t> f;
        encode_frame(make_error_reply(k.id, wire_error::WIRE_ERROR_STOPPING,
                                      "the sidecar is shutting down; the request was not run: retry on a new sidecar"),
                     f);
        send_frame(k.conn_serial, f);
    }
}

void event_loop::accept_all() {
    for (;;) {
        const int fd = accept4(lst_.fd, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0) {
            if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
                std::fprintf(stderr, "event_loop_accept: accept: %s\n", std::strerror(errno));
            }
            return;
        }
        connection c;
        c.fd       = fd;
        c.serial   = ++next_serial_;
        c.out      = hello_frame_;
        auto & ref = conns_[c.serial] = std::move(c);
        std::fprintf(stderr, "event_loop_accept: client %llu connected\n", static_cast<unsigned long long>(ref.serial));
        if (!connection_flush(ref)) {
            ref.dead = true;
        }
    }
}

void event_loop::sweep() {
    for (auto it = conns_.begin(); it != conns_.end();) {
        if (!it->second.dead) {
            ++it;
            continue;
        }
        const size_t dropped = pipe_.take_queued(it->first).size();
        std::fprintf(stderr, "event_loop_sweep: client %llu disconnected (%zu queued forwards dropped)\n",
                     static_cast<unsigned long long>(it->first), dropped);
        close(it->second.fd);
        it = conns_.erase(it);
    }
}

void event_loop::send_frame(uint64_t serial, const std::vector<uint8_t> & frame) {
    auto it = conns_.find(serial);
    if (it != conns_.end()) {
        connection_send(it->second, frame);
    }  // else the client left; its reply has no reader
}

void event_loop::drain_done() {
    for (auto & d : pipe_.take_done()) {
        send_frame(d.conn_serial, d.frame);
    }
}

void event_loop::expire_stalled_frames() {
    const auto now   = clock_type::now();
    const auto limit = std::chrono::milliseconds(frame_timeout_ms_);
    for (auto & kv : conns_) {
        connection & c = kv.second;
        if (!c.dead && !c.close_after_out && c.mid_frame() && now - c.last_read >= limit) {
            connection_frame_error(c, connection_stall_text(c, frame_timeout_ms_));
            if (!connection_flush(c)) {
                c.dead = true;
            }
        }
    }
}

int event_loop::poll_timeout_ms(clock_type::time_point next_watchdog, bool watchdog) const {
    const auto now = clock_type::now();
    long long  ms  = -1;
    auto       at_most = [&](clock_type::time_point t) {
        const long long left = std::max<long long>(
            0, std::chrono::duration_cast<std::chrono::milliseconds>(t - now).count() + 1);
        ms = ms < 0 ? left : std::min(ms, left);
    };
    if (watchdog) {
        at_most(next_watchdog);
    }
    for (const auto & kv : conns_) {
        if (kv.second.mid_frame() && !kv.second.close_after_out) {
            at_most(kv.second.last_read + std::chrono::milliseconds(frame_timeout_ms_));
        }
    }
    if (stopping_) {
        ms = ms < 0 ? 50 : std::min<long long>(ms, 50);
    }
    return static_cast<int>(std::min<long long>(ms, 1 << 30));
}

void event_loop::run() {
    const uint64_t watchdog_us   = notify_watchdog_interval_us();
    auto           next_watchdog = clock_type::now();
    const auto     on_frame      = [this](connection & c, frame_bytes payload) {
        const std::string bad = dispatch_.handle(c.serial, c.shm, std::move(payload), stopping_);
        if (!bad.empty()) {
            connection_frame_error(c, bad);
        }
    };
    for (;;) {
        if (stopping_ && pipe_.idle()) {
            drain_done();
            sweep();
            if (stop_deadline_ == clock_type::time_point{}) {
                stop_deadline_ = clock_type::now() + std::chrono::seconds(2);  // to flush the last replies
            }
            if (!any_output_pending() || clock_type::now() >= stop_deadline_) {
                return;
            }
        }
        std::vector<pollfd> fds;
        fds.push_back({signal_fd_, POLLIN, 0});
        fds.push_back({wake_fd_, POLLIN, 0});
        fds.push_back({stopping_ ? -1 : lst_.fd, POLLIN, 0});
        std::vector<uint64_t> serials;
        for (auto & kv : conns_) {
            short ev = 0;
            if (!kv.second.close_after_out) {
                ev |= POLLIN;
            }
            if (kv.second.output_pending()) {
                ev |= POLLOUT;
            }
            fds.push_back({kv.second.fd, ev, 0});
            serials.push_back(kv.first);
        }
        const int n = poll(fds.data(), fds.size(), poll_timeout_ms(next_watchdog, watchdog_us != 0));
        if (n < 0 && errno != EINTR) {
            std::fprintf(stderr, "event_loop_run: poll: %s\n", std::strerror(errno));
            return;
        }
        if (watchdog_us && clock_type::now() >= next_watchdog) {
            notify_send("WATCHDOG=1");
            next_watchdog = clock_type::now() + std::chrono::microseconds(watchdog_us);
        }
        if (n > 0) {
            if (fds[0].revents & POLLIN) {
                unsigned char signo = 0;
                if (read(signal_fd_, &signo, 1) == 1) {
                    std::fprintf(stderr, "event_loop_run: received signal %u; stopping\n", static_cast<unsigned>(signo));
                    begin_stop();
                }
            }
            if (fds[1].revents & POLLIN) {
                uint64_t v = 0;
                (void) !read(wake_fd_, &v, sizeof(v));
                drain_done();
            }
            if (!stopping_ && (fds[2].revents & POLLIN)) {
                accept_all();
            }
            for (size_t i = 0; i < serials.size(); i++) {
                const short re = fds[3 + i].revents;
                auto        it = conns_.find(serials[i]);
                if (it == conns_.end() || re == 0) {
                    continue;
                }
                bool alive = true;
                if (re & (POLLIN | POLLHUP | POLLERR)) {
                    alive = connection_read(it->second, pool_, on_frame);
                }
                if (alive && (re & POLLOUT)) {
                    alive = connection_flush(it->second);
                }
                if (!alive) {
                    it->second.dead = true;
                }
            }
        }
        expire_stalled_frames();
        sweep();
    }
}

}  // namespace rfdetr
