#include "server/server.h"

#include "protocol/protocol.h"
#include "server/listen.h"
#include "server/notify.h"
#include "server/options.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <fcntl.h>
#include <map>
#include <mutex>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <thread>
#include <unistd.h>

#ifndef RFDETR_SIDECAR_VERSION
#define RFDETR_SIDECAR_VERSION "0.0.0"
#endif

namespace rfdetr {

engine_factory engine_factory_default() {
    return engine_factory{engine_create, engine_names, engine_unbuilt_reason};
}

namespace {

using clock_type = std::chrono::steady_clock;

double ms_since(clock_type::time_point t0) {
    return std::chrono::duration<double, std::milli>(clock_type::now() - t0).count();
}


struct job {
    uint64_t             conn_serial;
    uint64_t             id;
    std::vector<uint8_t> payload;  // owns the bytes pixel_values points into
    const uint8_t *      pixels;
};

struct done {
    uint64_t             conn_serial;
    std::vector<uint8_t> frame;
};

// The forward worker: owns the engine's buffers; forwards run one at a time in FIFO order.
class worker {
  public:
    explicit worker(engine & eng, int wake_fd)
        : eng_(eng), wake_fd_(wake_fd), pixel_count_(static_cast<size_t>(k_input_channels) * eng.input_size() * eng.input_size()),
          pixels_(pixel_count_),
          logits_(static_cast<size_t>(eng.num_queries()) * eng.num_classes()),
          boxes_(static_cast<size_t>(eng.num_queries()) * 4) {
        thread_ = std::thread([this] { run(); });
    }

    ~worker() { stop(); }

    void submit(job j) {
        std::lock_guard<std::mutex> lock(mu_);
        queue_.push_back(std::move(j));
        cv_.notify_one();
    }

    // Removes queued (not started) jobs; of one connection, or all when serial == 0. Returns them.
    std::vector<job> take_queued(uint64_t serial) {
        std::lock_guard<std::mutex> lock(mu_);
        std::vector<job>            out;
        for (auto it = queue_.begin(); it != queue_.end();) {
            if (serial == 0 || it->conn_serial == serial) {
                out.push_back(std::move(*it));
                it = queue_.erase(it);
            } else {
                ++it;
            }
        }
        return out;
    }

    std::vector<done> take_done() {
        std::lock_guard<std::mutex> lock(mu_);
        std::vector<done>           out(std::make_move_iterator(done_.begin()), std::make_move_iterator(done_.end()));
        done_.clear();
        return out;
    }

    bool idle() {
        std::lock_guard<std::mutex> lock(mu_);
        return queue_.empty() && !busy_;
    }

    void stop() {
        {
            std::lock_guard<std::mutex> lock(mu_);
            quit_ = true;
            cv_.notify_one();
        }
        if (thread_.joinable()) {
            thread_.join();
        }
    }

  private:
    void run() {
        for (;;) {
            job j;
            {
                std::unique_lock<std::mutex> lock(mu_);
                cv_.wait(lock, [this] { return quit_ || !queue_.empty(); });
                if (quit_ && queue_.empty()) {
                    return;
                }
                j = std::move(queue_.front());
                queue_.pop_front();
                busy_ = true;
            }
            done d{j.conn_serial, {}};
            std::memcpy(pixels_.data(), j.pixels, pixel_count_ * sizeof(float));  // the bin may be misaligned
            j.payload = std::vector<uint8_t>();
            const auto t0 = clock_type::now();
            try {
                eng_.forward(pixels_.data(), logits_.data(), boxes_.data());
                message m    = make_ok_reply(j.id);
                m.fields    |= WIRE_FIELD_LOGITS | WIRE_FIELD_PRED_BOXES | WIRE_FIELD_FORWARD_MS;
                m.forward_ms = ms_since(t0);
                m.logits     = {reinterpret_cast<const uint8_t *>(logits_.data()), logits_.size() * sizeof(float)};
                m.pred_boxes = {reinterpret_cast<const uint8_t *>(boxes_.data()), boxes_.size() * sizeof(float)};
                encode_frame(m, d.frame);
            } catch (const std::exception & e) {
                std::fprintf(stderr, "worker: forward of request %llu failed: %s\n",
                             static_cast<unsigned long long>(j.id), e.what());
                encode_frame(make_error_reply(j.id, wire_error::WIRE_ERROR_FORWARD, std::string("forward: ") + e.what()),
                             d.frame);
            }
            {
                std::lock_guard<std::mutex> lock(mu_);
                done_.push_back(std::move(d));
                busy_ = false;
            }
            const uint64_t one = 1;
            (void) !write(wake_fd_, &one, sizeof(one));
        }
    }

    engine &                eng_;
    int                     wake_fd_;
    size_t                  pixel_count_;  // 3 * S * S for the loaded variant
    std::vector<float>      pixels_;
    std::vector<float>      logits_;
    std::vector<float>      boxes_;
    std::mutex              mu_;
    std::condition_variable cv_;
    std::deque<job>         queue_;
    std::vector<done>       done_;
    bool                    busy_ = false;
    bool                    quit_ = false;
    std::thread             thread_;
};

struct connection {
    int                  fd     = -1;
    uint64_t             serial = 0;
    uint8_t              header[k_frame_header] = {0, 0, 0, 0};
    size_t               header_got = 0;
    std::vector<uint8_t> payload;
    size_t               payload_got = 0;
    bool                 in_payload  = false;
    std::vector<uint8_t> out;
    size_t               out_off         = 0;
    bool                 close_after_out = false;  // a framing error: stop reading, flush the error, close
    bool                 dead            = false;  // finished; removed by sweep() outside any per-connection code
};

class server {
  public:
    server(engine & eng, listener & lst, int signal_fd)
        : eng_(eng), lst_(lst), signal_fd_(signal_fd), wake_fd_(eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)),
          worker_(eng, wake_fd_) {
        message hello;
        hello.id               = 0;
        hello.fields           = k_hello_fields;
        hello.op               = wire_op::WIRE_OP_HELLO;
        hello.ok               = true;
        hello.protocol_version = k_protocol_version;
        hello.sidecar_version  = RFDETR_SIDECAR_VERSION;
        hello.engine           = eng.name();
        hello.device           = eng.device();
        hello.input_shape      = {k_input_channels, static_cast<uint64_t>(eng.input_size()), static_cast<uint64_t>(eng.input_size())};
        hello.num_queries      = static_cast<uint64_t>(eng.num_queries());
        hello.num_classes      = static_cast<uint64_t>(eng.num_classes());
        hello.labels           = eng.labels();
        hello.labels.resize(hello.num_classes, "N/A");
        encode_frame(hello, hello_frame_);
    }

    ~server() {
        worker_.stop();
        for (auto & kv : conns_) {
            close(kv.second.fd);
        }
        close(wake_fd_);
    }

    void run() {
        const uint64_t watchdog_us = notify_watchdog_interval_us();
        auto           next_watchdog = clock_type::now();
        clock_type::time_point stop_deadline{};
        for (;;) {
            if (stopping_ && worker_.idle()) {
                drain_done();
                sweep();
                if (stop_deadline == clock_type::time_point{}) {
                    stop_deadline = clock_type::now() + std::chrono::seconds(2);  // to flush the last replies
                }
                if (!any_output_pending() || clock_type::now() >= stop_deadline) {
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
                if (kv.second.out_off < kv.second.out.size()) {
                    ev |= POLLOUT;
                }
                fds.push_back({kv.second.fd, ev, 0});
                serials.push_back(kv.first);
            }
            int timeout_ms = -1;
            if (watchdog_us) {
                const auto wait = std::chrono::duration_cast<std::chrono::milliseconds>(next_watchdog - clock_type::now()).count();
                timeout_ms = static_cast<int>(std::max<long long>(0, wait));
            }
            if (stopping_) {
                timeout_ms = timeout_ms < 0 ? 50 : std::min(timeout_ms, 50);
            }
            const int n = poll(fds.data(), fds.size(), timeout_ms);
            if (n < 0 && errno != EINTR) {
                std::fprintf(stderr, "server_run: poll: %s\n", std::strerror(errno));
                return;
            }
            if (watchdog_us && clock_type::now() >= next_watchdog) {
                notify_send("WATCHDOG=1");
                next_watchdog = clock_type::now() + std::chrono::microseconds(watchdog_us);
            }
            if (n <= 0) {
                continue;
            }
            if (fds[0].revents & POLLIN) {
                unsigned char signo = 0;
                if (read(signal_fd_, &signo, 1) == 1) {
                    std::fprintf(stderr, "server_run: received signal %u; stopping\n", static_cast<unsigned>(signo));
                    begin_stop(stop_deadline);
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
                    alive = on_readable(it->second, stop_deadline);
                }
                if (alive && (re & POLLOUT)) {
                    alive = flush(it->second);
                }
                if (!alive) {
                    it->second.dead = true;
                }
            }
            sweep();
        }
    }

  private:
    bool any_output_pending() {
        for (auto & kv : conns_) {
            if (kv.second.out_off < kv.second.out.size()) {
                return true;
            }
        }
        return false;
    }

    void begin_stop(clock_type::time_point & stop_deadline) {
        if (stopping_) {
            return;
        }
        stopping_     = true;
        stop_deadline = clock_type::time_point{};  // set once the forward in progress has finished
        notify_send("STOPPING=1");
        for (auto & j : worker_.take_queued(0)) {
            reply_error(j.conn_serial, j.id, wire_error::WIRE_ERROR_STOPPING,
                        "the sidecar is shutting down; the request was not run: retry on a new sidecar");
        }
    }

    void accept_all() {
        for (;;) {
            const int fd = accept4(lst_.fd, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
            if (fd < 0) {
                if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
                    std::fprintf(stderr, "server_accept: accept: %s\n", std::strerror(errno));
                }
                return;
            }
            connection c;
            c.fd     = fd;
            c.serial = ++next_serial_;
            c.out    = hello_frame_;
            auto & ref = conns_[c.serial] = std::move(c);
            std::fprintf(stderr, "server_accept: client %llu connected\n", static_cast<unsigned long long>(ref.serial));
            if (!flush(ref)) {
                ref.dead = true;
            }
        }
    }

    void sweep() {
        for (auto it = conns_.begin(); it != conns_.end();) {
            if (!it->second.dead) {
                ++it;
                continue;
            }
            const size_t dropped = worker_.take_queued(it->first).size();
            std::fprintf(stderr, "server_sweep: client %llu disconnected (%zu queued forwards dropped)\n",
                         static_cast<unsigned long long>(it->first), dropped);
            close(it->second.fd);
            it = conns_.erase(it);
        }
    }

    void send_frame(uint64_t serial, const std::vector<uint8_t> & frame) {
        auto it = conns_.find(serial);
        if (it == conns_.end()) {
            return;  // the client left; its reply has no reader
        }
        it->second.out.insert(it->second.out.end(), frame.begin(), frame.end());
        if (!it->second.dead && !flush(it->second)) {
            it->second.dead = true;
        }
    }

    void reply_error(uint64_t serial, uint64_t id, wire_error code, const std::string & text) {
        std::vector<uint8_t> f;
        encode_frame(make_error_reply(id, code, text), f);
        send_frame(serial, f);
    }

    void drain_done() {
        for (auto & d : worker_.take_done()) {
            send_frame(d.conn_serial, d.frame);
        }
    }

    // Writes what the socket takes; false when the connection is finished (error, or flushed after E_FRAME).
    bool flush(connection & c) {
        while (c.out_off < c.out.size()) {
            const ssize_t n = send(c.fd, c.out.data() + c.out_off, c.out.size() - c.out_off, MSG_NOSIGNAL);
            if (n < 0) {
                if (errno == EAGAIN || errno == EWOULDBLOCK) {
                    return true;
                }
                if (errno == EINTR) {
                    continue;
                }
                return false;
            }
            c.out_off += static_cast<size_t>(n);
        }
        c.out.clear();
        c.out_off = 0;
        return !c.close_after_out;
    }

    void frame_error(connection & c, const std::string & text) {
        std::fprintf(stderr, "server_read: client %llu sent a malformed frame (%s); closing it\n",
                     static_cast<unsigned long long>(c.serial), text.c_str());
        std::vector<uint8_t> f;
        encode_frame(make_error_reply(0, wire_error::WIRE_ERROR_FRAME, text), f);
        c.out.insert(c.out.end(), f.begin(), f.end());
        c.close_after_out = true;
        shutdown(c.fd, SHUT_RD);
    }

    // Reads what is available and handles complete frames; false when the connection is finished.
    bool on_readable(connection & c, clock_type::time_point & stop_deadline) {
        for (;;) {
            if (c.dead) {
                return false;
            }
            if (c.close_after_out) {
                return flush(c);
            }
            ssize_t n;
            if (!c.in_payload) {
                n = recv(c.fd, c.header + c.header_got, k_frame_header - c.header_got, 0);
            } else {
                n = recv(c.fd, c.payload.data() + c.payload_got, c.payload.size() - c.payload_got, 0);
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
            if (!c.in_payload) {
                c.header_got += static_cast<size_t>(n);
                if (c.header_got < k_frame_header) {
                    continue;
                }
                uint32_t len = 0;
                auto     r   = frame_length_check(c.header, len);
                if (r.error != wire_error::WIRE_ERROR_NONE) {
                    frame_error(c, r.message);
                    continue;
                }
                c.payload.assign(len, 0);
                c.payload_got = 0;
                c.in_payload  = true;
                continue;
            }
            c.payload_got += static_cast<size_t>(n);
            if (c.payload_got < c.payload.size()) {
                continue;
            }
            c.in_payload = false;
            c.header_got = 0;
            handle_payload(c, stop_deadline);
        }
    }

    void handle_payload(connection & c, clock_type::time_point & stop_deadline) {
        message req;
        auto    r = decode_payload(c.payload.data(), c.payload.size(), req);
        if (r.error == wire_error::WIRE_ERROR_FRAME) {
            frame_error(c, r.message);
            return;
        }
        if (r.error != wire_error::WIRE_ERROR_NONE) {
            reply_error(c.serial, r.id, r.error, r.message);
            return;
        }
        if (req.has(WIRE_FIELD_OK)) {
            reply_error(c.serial, req.id, wire_error::WIRE_ERROR_UNKNOWN_OP,
                        "clients send requests {id, op}; replies and hello come from the sidecar");
            return;
        }
        switch (req.op) {
            case wire_op::WIRE_OP_PING: {
                std::vector<uint8_t> f;
                encode_frame(make_ok_reply(req.id), f);
                send_frame(c.serial, f);
                return;
            }
            case wire_op::WIRE_OP_SHUTDOWN: {
                std::fprintf(stderr, "server_read: client %llu asked to shut down\n", static_cast<unsigned long long>(c.serial));
                std::vector<uint8_t> f;
                encode_frame(make_ok_reply(req.id), f);
                send_frame(c.serial, f);
                begin_stop(stop_deadline);
                return;
            }
            case wire_op::WIRE_OP_INFER: {
                const size_t want = static_cast<size_t>(k_input_channels) * eng_.input_size() * eng_.input_size() * sizeof(float);
                if (req.pixel_values.size != want) {
                    reply_error(c.serial, req.id, wire_error::WIRE_ERROR_FIELD,
                                "pixel_values has " + std::to_string(req.pixel_values.size) + " bytes; expected " +
                                    std::to_string(want) + " (f32 [3," + std::to_string(eng_.input_size()) + "," +
                                    std::to_string(eng_.input_size()) + "] little-endian CHW)");
                    return;
                }
                if (stopping_) {
                    reply_error(c.serial, req.id, wire_error::WIRE_ERROR_STOPPING,
                                "the sidecar is shutting down; the request was not run: retry on a new sidecar");
                    return;
                }
                job j{c.serial, req.id, {}, req.pixel_values.data};
                j.payload.swap(c.payload);  // the pixels stay where they are; the connection gets a fresh buffer
                worker_.submit(std::move(j));
                return;
            }
            case wire_op::WIRE_OP_HELLO:
            case wire_op::WIRE_OP_NONE: break;
        }
        reply_error(c.serial, req.id, wire_error::WIRE_ERROR_UNKNOWN_OP, "unsupported op");
    }

    engine &                         eng_;
    listener &                       lst_;
    int                              signal_fd_;
    int                              wake_fd_;
    worker                           worker_;
    std::vector<uint8_t>             hello_frame_;
    std::map<uint64_t, connection>   conns_;
    uint64_t                         next_serial_ = 0;
    bool                             stopping_    = false;
};

// SIGTERM/SIGINT become a byte on this pipe, read by the poll loop. A handler rather than a blocked mask +
// signalfd: libraries may start threads before main() (OpenBLAS does, in a constructor) and those threads
// would not have the signal blocked, so the default action (terminate) could win. A handler runs on any
// thread and only writes one byte (async-signal-safe).
int g_signal_pipe[2] = {-1, -1};

extern "C" void on_stop_signal(int sig) {
    const int           saved = errno;
    const unsigned char b     = static_cast<unsigned char>(sig);
    (void) !write(g_signal_pipe[1], &b, 1);
    errno = saved;
}

const char * getenv_fn(const char * name) {
    return std::getenv(name);
}

void fail_line(const std::string & what) {
    std::fprintf(stderr, "rfdetr-sidecar: %s\n", what.c_str());
}

}  // namespace

int sidecar_main(int argc, char ** argv, const engine_factory & factory) {
    const pid_t parent_at_start = getppid();

    sidecar_options opts;
    std::string     err;
    switch (options_parse(argc, argv, getenv_fn, opts, err)) {
        case options_status::OPTIONS_HELP: std::fputs(options_help(factory.names()).c_str(), stdout); return 0;
        case options_status::OPTIONS_VERSION:
            std::printf("rfdetr-sidecar %s (protocol %u)\n", RFDETR_SIDECAR_VERSION, k_protocol_version);
            return 0;
        case options_status::OPTIONS_USAGE_ERROR: fail_line(err + " (see rfdetr-sidecar --help)"); return 2;
        case options_status::OPTIONS_OK: break;
    }
    const auto names = factory.names();
    if (std::find(names.begin(), names.end(), opts.engine) == names.end()) {
        const std::string why = factory.unbuilt_reason ? factory.unbuilt_reason(opts.engine) : "";
        if (!why.empty()) {
            fail_line(why);  // a known engine this build lacks: a startup failure that says how to build it
            return 1;
        }
        std::string known;
        for (const auto & n : names) {
            known += (known.empty() ? "" : ", ") + n;
        }
        fail_line("--engine '" + opts.engine + "' is not built into this sidecar; built: " +
                  (known.empty() ? "(none)" : known) + ". Choose one of those or rebuild with that engine.");
        return 2;
    }

    // Signals become readable events on the poll loop. Parent death arrives as SIGTERM: the same clean path.
    if (pipe2(g_signal_pipe, O_CLOEXEC | O_NONBLOCK) != 0) {
        fail_line(std::string("cannot create the signal pipe: ") + std::strerror(errno));
        return 1;
    }
    struct sigaction sa{};
    sa.sa_handler = on_stop_signal;
    sa.sa_flags   = SA_RESTART;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGTERM, &sa, nullptr);
    sigaction(SIGINT, &sa, nullptr);
    std::signal(SIGPIPE, SIG_IGN);
    if (opts.exit_with_parent) {
        prctl(PR_SET_PDEATHSIG, SIGTERM);
        if (getppid() != parent_at_start) {
            fail_line("the parent process exited before the sidecar started (--exit-with-parent); not starting");
            return 1;
        }
    }
    const int signal_fd = g_signal_pipe[0];

    listener lst;
    try {
        lst = listener_open(opts.socket_path);
    } catch (const std::exception & e) {
        fail_line(std::string("cannot listen: ") + e.what());
        return 1;
    }

    std::unique_ptr<engine> eng;
    const auto              t_load = clock_type::now();
    double                  load_ms = 0.0;
    double                  warmup_ms = 0.0;
    try {
        engine_options eo;
        eo.threads   = opts.threads;
        eo.device_id = opts.device_id;
        eo.precision = opts.precision;
        eo.eager     = opts.eager;
        eng          = factory.create(opts.engine, opts.weights_dir, eo);
        load_ms      = ms_since(t_load);
        // Warm-up: two forwards on a fixed synthetic input (page-faults buffers, fills caches; TT captures its trace).
        std::vector<float> pixels(static_cast<size_t>(k_input_channels) * eng->input_size() * eng->input_size());
        for (size_t i = 0; i < pixels.size(); i++) {
            pixels[i] = static_cast<float>(std::sin(0.001 * static_cast<double>(i)));
        }
        std::vector<float> logits(static_cast<size_t>(eng->num_queries()) * eng->num_classes());
        std::vector<float> boxes(static_cast<size_t>(eng->num_queries()) * 4);
        const auto         t_warm = clock_type::now();
        for (int i = 0; i < 2; i++) {
            eng->forward(pixels.data(), logits.data(), boxes.data());
        }
        warmup_ms = ms_since(t_warm);
    } catch (const std::exception & e) {
        listener_close(lst);
        fail_line("engine '" + opts.engine + "' failed to start from '" + opts.weights_dir + "': " + e.what() +
                  " (no other engine is tried; fix the cause or choose another --engine)");
        return 1;
    }

    nlohmann::json ready = {
        {"engine", eng->name()},
        {"device", eng->device()},
        {"protocol_version", k_protocol_version},
        {"sidecar_version", RFDETR_SIDECAR_VERSION},
        {"load_ms", std::round(load_ms * 10.0) / 10.0},
        {"warmup_ms", std::round(warmup_ms * 10.0) / 10.0},
        {"socket", lst.path},
        {"pid", static_cast<long long>(getpid())},
    };
    std::printf("READY %s\n", ready.dump().c_str());
    std::fflush(stdout);
    notify_send("READY=1");
    std::fprintf(stderr, "sidecar_main: engine %s on %s ready on %s (load %.1f ms, warm-up %.1f ms)\n",
                 eng->name().c_str(), eng->device().c_str(), lst.path.c_str(), load_ms, warmup_ms);

    {
        server srv(*eng, lst, signal_fd);
        srv.run();
    }  // joins the worker after the forward in progress
    eng.reset();
    listener_close(lst);
    close(g_signal_pipe[0]);
    close(g_signal_pipe[1]);
    std::fprintf(stderr, "sidecar_main: stopped cleanly\n");
    return 0;
}

}  // namespace rfdetr
