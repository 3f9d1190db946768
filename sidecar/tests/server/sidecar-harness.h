// The harness of the sidecar process tests: spawn rfdetr-sidecar-test, read its READY line, talk to it over
// its Unix socket frame by frame. Shared by the server test files.
#pragma once

#include "protocol/protocol.h"
#include "test-engine.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstring>
#include <fcntl.h>
#include <poll.h>
#include <string>
#include <linux/sockios.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <thread>
#include <unistd.h>
#include <vector>

namespace rfdetr_test {


using json = nlohmann::json;
using rfdetr::message;
using clk = std::chrono::steady_clock;

inline constexpr size_t k_pixels = 3u * 560u * 560u;

inline std::string make_tmp_dir() {
    char tmpl[] = "/tmp/rfdetr-sc-XXXXXX";
    const char * d = mkdtemp(tmpl);
    EXPECT_NE(d, nullptr);
    return d ? d : "";
}

// Alive and not a zombie (an orphan's zombie may linger until init reaps it).
inline bool process_alive(pid_t pid) {
    if (kill(pid, 0) != 0) return false;
    FILE * f = fopen(("/proc/" + std::to_string(pid) + "/stat").c_str(), "r");
    if (!f) return false;
    int  ignored = 0;
    char comm[256] = {0};
    char state     = '?';
    const int n    = fscanf(f, "%d %255s %c", &ignored, comm, &state);
    fclose(f);
    return n == 3 && state != 'Z' && state != 'X';
}

inline bool file_exists(const std::string & p) {
    struct stat st{};
    return lstat(p.c_str(), &st) == 0;
}

struct sidecar_proc {
    pid_t       pid    = -1;
    int         out_fd = -1;
    int         err_fd = -1;
    std::string out_text;
    std::string err_text;
    json        ready;
    int         status = -1;  // raw wait status once reaped

    ~sidecar_proc() {
        if (pid > 0 && status == -1) {
            kill(pid, SIGKILL);
            waitpid(pid, &status, 0);
        }
        if (err_fd >= 0) {
            drain_stderr();
        }
        // Under the sanitizer build (sidecar/build-asan) a report in the child must fail the test.
        EXPECT_EQ(err_text.find("Sanitizer"), std::string::npos) << err_text;
        EXPECT_EQ(err_text.find("runtime error:"), std::string::npos) << err_text;
        if (out_fd >= 0) close(out_fd);
        if (err_fd >= 0) close(err_fd);
    }

    void spawn(const std::vector<std::string> & args, const std::vector<std::string> & env = {}, int listen_fd = -1) {
        int out[2], err[2];
        ASSERT_EQ(pipe2(out, O_CLOEXEC), 0);
        ASSERT_EQ(pipe2(err, O_CLOEXEC), 0);
        pid = fork();
        ASSERT_GE(pid, 0);
        if (pid == 0) {
            dup2(out[1], 1);
            dup2(err[1], 2);
            for (const auto & kv : env) {
                const auto eq = kv.find('=');
                setenv(kv.substr(0, eq).c_str(), kv.substr(eq + 1).c_str(), 1);
            }
            if (listen_fd >= 0) {
                dup2(listen_fd, 3);
                setenv("LISTEN_FDS", "1", 1);
                setenv("LISTEN_PID", std::to_string(getpid()).c_str(), 1);
            }
            std::vector<char *> argv;
            argv.push_back(const_cast<char *>(RFDETR_SIDECAR_TEST_BIN));
            for (const auto & a : args) {
                argv.push_back(const_cast<char *>(a.c_str()));
            }
            argv.push_back(nullptr);
            execv(RFDETR_SIDECAR_TEST_BIN, argv.data());
            _exit(127);
        }
        close(out[1]);
        close(err[1]);
        out_fd = out[0];
        err_fd = err[0];
        fcntl(err_fd, F_SETFL, O_NONBLOCK);
    }

    // Reads stdout until the READY line (or EOF / timeout); returns the line.
    std::string wait_ready(int timeout_ms = 15000) {
        const auto end = clk::now() + std::chrono::milliseconds(timeout_ms);
        while (out_text.find('\n') == std::string::npos && clk::now() < end) {
            pollfd p{out_fd, POLLIN, 0};
            if (poll(&p, 1, 100) > 0) {
                char    buf[4096];
                ssize_t n = read(out_fd, buf, sizeof(buf));
                if (n <= 0) break;
                out_text.append(buf, static_cast<size_t>(n));
            }
        }
        const auto nl = out_text.find('\n');
        std::string line = nl == std::string::npos ? "" : out_text.substr(0, nl);
        if (line.rfind("READY ", 0) == 0) {
            ready = json::parse(line.substr(6));
        }
        return line;
    }

    // Waits up to timeout_ms for output on stdout or stderr and appends what arrived.
    void read_some(int timeout_ms) {
        pollfd ps[2] = {{out_fd, POLLIN, 0}, {err_fd, POLLIN, 0}};
        if (poll(ps, 2, timeout_ms) <= 0) return;
        char buf[4096];
        if (ps[0].revents & POLLIN) {
            const ssize_t n = read(out_fd, buf, sizeof(buf));
            if (n > 0) out_text.append(buf, static_cast<size_t>(n));
        }
        drain_stderr();
    }

    // Forwards that have reached the test engines' gate so far (RFDETR_TEST_GATE, warm-up included).
    int gate_arrivals() {
        drain_stderr();
        int n = 0;
        for (size_t at = err_text.find(" at the gate\n"); at != std::string::npos; at = err_text.find(" at the gate\n", at + 1)) n++;
        return n;
    }

    // Waits for `needle` on stderr (an event the sidecar logs); false on timeout or exit.
    bool wait_stderr(const std::string & needle, int timeout_ms = 10000) {
        const auto end = clk::now() + std::chrono::milliseconds(timeout_ms);
        while (drain_stderr().find(needle) == std::string::npos) {
            if (clk::now() >= end || !process_alive(pid)) return false;
            read_some(100);
        }
        return true;
    }

    // Waits until `n` forwards have reached the gate in all.
    bool wait_gate_arrivals(int n, int timeout_ms = 10000) {
        const auto end = clk::now() + std::chrono::milliseconds(timeout_ms);
        while (gate_arrivals() < n) {
            if (clk::now() >= end || !process_alive(pid)) return false;
            read_some(100);
        }
        return true;
    }

    std::string drain_stderr() {
        char buf[4096];
        for (;;) {
            ssize_t n = read(err_fd, buf, sizeof(buf));
            if (n <= 0) break;
            err_text.append(buf, static_cast<size_t>(n));
        }
        return err_text;
    }

    // Exit code (>= 0), 128+signal when killed, or -1 on timeout.
    int wait_exit(int timeout_ms = 10000) {
        const auto end = clk::now() + std::chrono::milliseconds(timeout_ms);
        while (clk::now() < end) {
            drain_stderr();
            int st = 0;
            if (waitpid(pid, &st, WNOHANG) == pid) {
                status = st;
                drain_stderr();
                return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
            }
            std::this_thread::sleep_for(std::chrono::milliseconds(10));
        }
        return -1;
    }
};

// The FIFO the test engines' forwards wait on (RFDETR_TEST_GATE): each byte written lets one forward through.
// Opened read-write here so neither side's open waits for the other.
struct gate {
    std::string path;
    int         fd = -1;
    explicit gate(const std::string & dir) : path(dir + "/gate") {
        EXPECT_EQ(mkfifo(path.c_str(), 0600), 0) << path << ": " << std::strerror(errno);
        fd = ::open(path.c_str(), O_RDWR | O_CLOEXEC);
        EXPECT_GE(fd, 0) << path << ": " << std::strerror(errno);
    }
    ~gate() {
        if (fd >= 0) close(fd);
    }
    void release(int forwards = 1) {
        for (int i = 0; i < forwards; i++) EXPECT_EQ(write(fd, "x", 1), 1);
    }
    std::string env() const { return "RFDETR_TEST_GATE=" + path; }
};

struct client {
    int fd = -1;
    ~client() {
        if (fd >= 0) close(fd);
    }
    bool connect_to(const std::string & path) {
        fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        sockaddr_un a{};
        a.sun_family = AF_UNIX;
        std::strncpy(a.sun_path, path.c_str(), sizeof(a.sun_path) - 1);
        return connect(fd, reinterpret_cast<sockaddr *>(&a), sizeof(a)) == 0;
    }
    void send_raw(const std::vector<uint8_t> & b) {
        size_t off = 0;
        while (off < b.size()) {
            ssize_t n = send(fd, b.data() + off, b.size() - off, MSG_NOSIGNAL);
            if (n <= 0) return;
            off += static_cast<size_t>(n);
        }
    }
    // Waits until the sidecar has read every byte sent on this connection (SIOCOUTQ on a Unix stream socket
    // counts the bytes still queued for the peer): a bounded poll of the other process's state, the only way
    // to know it has consumed them. False on timeout.
    bool wait_consumed(int timeout_ms = 10000) const {
        const auto end = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
        for (;;) {
            int queued = 0;
            if (ioctl(fd, SIOCOUTQ, &queued) != 0) return false;
            if (queued == 0) return true;
            if (std::chrono::steady_clock::now() >= end) return false;
            std::this_thread::sleep_for(std::chrono::milliseconds(1));
        }
    }
    void send_msg(const message & m) {
        std::vector<uint8_t> f;
        rfdetr::encode_frame(m, f);
        send_raw(f);
    }
    bool read_exact(uint8_t * p, size_t n, int timeout_ms) {
        const auto end = clk::now() + std::chrono::milliseconds(timeout_ms);
        size_t     got = 0;
        while (got < n) {
            const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(end - clk::now()).count();
            pollfd     pf{fd, POLLIN, 0};
            if (left <= 0 || poll(&pf, 1, static_cast<int>(left)) <= 0) return false;
            ssize_t r = recv(fd, p + got, n - got, 0);
            if (r <= 0) return false;
            got += static_cast<size_t>(r);
        }
        return true;
    }
    // One frame, decoded; `store` keeps the payload alive for byte views in `m`.
    bool recv_msg(message & m, std::vector<uint8_t> & store, int timeout_ms = 10000) {
        uint8_t h[4];
        if (!read_exact(h, 4, timeout_ms)) return false;
        uint32_t len = 0;
        if (rfdetr::frame_length_check(h, len).error != rfdetr::wire_error::WIRE_ERROR_NONE) return false;
        store.resize(len);
        if (!read_exact(store.data(), len, timeout_ms)) return false;
        auto r = rfdetr::decode_payload(store.data(), len, m);
        EXPECT_EQ(r.error, rfdetr::wire_error::WIRE_ERROR_NONE) << r.message;
        return r.error == rfdetr::wire_error::WIRE_ERROR_NONE;
    }
    bool at_eof(int timeout_ms = 5000) {
        pollfd pf{fd, POLLIN, 0};
        if (poll(&pf, 1, timeout_ms) <= 0) return false;
        char c;
        return recv(fd, &c, 1, 0) == 0;
    }
    // Connects and consumes the hello.
    bool open(const std::string & path, message * hello = nullptr) {
        if (!connect_to(path)) return false;
        message              m;
        std::vector<uint8_t> s;
        if (!recv_msg(m, s)) return false;
        if (hello) *hello = m;
        return m.op == rfdetr::wire_op::WIRE_OP_HELLO;
    }
};

// An infer reply's output `name` (test-echo: "logits", "pred_boxes"), or an empty view when it has none.
inline rfdetr::byte_view reply_output(const message & r, const std::string & name) {
    for (const auto & o : r.outputs) {
        if (o.name == name) return o.data;
    }
    return {};
}

inline message make_request(uint64_t id, rfdetr::wire_op op) {
    message m;
    m.id     = id;
    m.op     = op;
    m.fields = rfdetr::WIRE_FIELD_OP;
    return m;
}

inline message make_infer(uint64_t id, const std::vector<float> & px) {
    message m          = make_request(id, rfdetr::wire_op::WIRE_OP_INFER);
    m.fields          |= rfdetr::WIRE_FIELD_PIXEL_VALUES;
    m.pixel_values     = {reinterpret_cast<const uint8_t *>(px.data()), px.size() * sizeof(float)};
    return m;
}

// A new connection to `socket` answers a ping: the sidecar is still serving.
inline ::testing::AssertionResult serves_a_ping(const std::string & socket, uint64_t id) {
    client c;
    if (!c.open(socket)) {
        return ::testing::AssertionFailure() << "cannot connect to " << socket;
    }
    c.send_msg(make_request(id, rfdetr::wire_op::WIRE_OP_PING));
    message              r;
    std::vector<uint8_t> s;
    if (!c.recv_msg(r, s) || r.id != id || !r.ok) {
        return ::testing::AssertionFailure() << "no ok reply to ping " << id;
    }
    return ::testing::AssertionSuccess();
}

inline message make_image_infer(uint64_t id, int width, int height, const std::vector<uint8_t> & rgb) {
    message m      = make_request(id, rfdetr::wire_op::WIRE_OP_INFER);
    m.fields      |= rfdetr::WIRE_FIELD_IMAGE;
    m.image_width  = static_cast<uint64_t>(width);
    m.image_height = static_cast<uint64_t>(height);
    m.image_rgb    = {rgb.data(), rgb.size()};
    return m;
}

// Deterministic noise, RGB u8 width x height.
inline std::vector<uint8_t> noise_rgb(int width, int height, uint32_t seed) {
    std::vector<uint8_t> rgb(static_cast<size_t>(width) * height * 3);
    uint32_t             x = seed * 2654435761u + 1;
    for (auto & b : rgb) {
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        b = static_cast<uint8_t>(x >> 11);
    }
    return rgb;
}

inline std::vector<float> ramp_pixels() {
    std::vector<float> px(k_pixels);
    for (size_t i = 0; i < px.size(); i++) {
        px[i] = static_cast<float>(i % 1000) * 0.001f;
    }
    return px;
}

class sidecar : public ::testing::Test {
  protected:
    void SetUp() override {
        dir_    = make_tmp_dir();
        socket_ = dir_ + "/run/s.sock";
    }
    void TearDown() override {
        std::string cmd = "rm -rf '" + dir_ + "'";
        (void) !system(cmd.c_str());
    }
    void start(sidecar_proc & p, const std::vector<std::string> & extra_env = {}, std::vector<std::string> extra_args = {},
               const std::string & engine = "test-echo") {
        std::vector<std::string> args = {"--socket", socket_, "--engine", engine, "--weights", dir_};
        args.insert(args.end(), extra_args.begin(), extra_args.end());
        p.spawn(args, extra_env);
        const std::string line = p.wait_ready();
        ASSERT_EQ(line.rfind("READY ", 0), 0u) << "no READY line; stderr: " << p.drain_stderr();
    }
    // start() with every forward held at `g`: the warm-up forwards are let through one by one until READY.
    void start_gated(sidecar_proc & p, gate & g, std::vector<std::string> extra_env = {}, std::vector<std::string> extra_args = {},
                     const std::string & engine = "test-echo") {
        extra_env.push_back(g.env());
        std::vector<std::string> args = {"--socket", socket_, "--engine", engine, "--weights", dir_};
        args.insert(args.end(), extra_args.begin(), extra_args.end());
        p.spawn(args, extra_env);
        const auto end = clk::now() + std::chrono::seconds(15);
        int        let_through = 0;
        while (p.out_text.find('\n') == std::string::npos && clk::now() < end && process_alive(p.pid)) {
            if (p.gate_arrivals() > let_through) {
                g.release();
                let_through++;
            }
            p.read_some(100);
        }
        const std::string line = p.wait_ready();
        ASSERT_EQ(line.rfind("READY ", 0), 0u) << "no READY line; stderr: " << p.drain_stderr();
    }
    std::string dir_;
    std::string socket_;
};

}  // namespace rfdetr_test
