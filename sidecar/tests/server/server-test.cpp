// The sidecar process end to end (rfdetr-sidecar-test with the "test-echo" engine) on real Unix sockets.
#include "sidecar-harness.h"

namespace {

using namespace rfdetr_test;

TEST_F(sidecar, ready_line_hello_and_socket_permissions) {
    sidecar_proc p;
    start(p, {"RFDETR_TEST_ECHO_LOAD_MS=50", "RFDETR_TEST_ECHO_FORWARD_MS=40"});
    EXPECT_EQ(p.out_text, p.out_text.substr(0, p.out_text.find('\n') + 1)) << "stdout holds exactly one line";
    EXPECT_EQ(p.ready["engine"], "test-echo");
    EXPECT_EQ(p.ready["device"], "test double (deterministic echo)");
    EXPECT_EQ(p.ready["protocol_version"], 4);
    EXPECT_EQ(p.ready["sidecar_version"], "0.1.0");
    EXPECT_EQ(p.ready["socket"], socket_);
    EXPECT_EQ(p.ready["pid"], p.pid);
    EXPECT_GE(p.ready["load_ms"].get<double>(), 50.0);
    EXPECT_GE(p.ready["warmup_ms"].get<double>(), 80.0) << "two warm-up forwards of >= 40 ms each";

    struct stat st{};
    ASSERT_EQ(stat(socket_.c_str(), &st), 0);
    EXPECT_TRUE(S_ISSOCK(st.st_mode));
    EXPECT_EQ(st.st_mode & 0777, 0600u);
    ASSERT_EQ(stat((dir_ + "/run").c_str(), &st), 0);
    EXPECT_EQ(st.st_mode & 0777, 0700u);

    client  c;
    message hello;
    ASSERT_TRUE(c.open(socket_, &hello));
    EXPECT_EQ(hello.id, 0u);
    EXPECT_EQ(hello.protocol_version, 4u);
    EXPECT_EQ(hello.variant, "base");  // the test engine's (its input side is Base's 560)
    EXPECT_EQ(hello.engine, "test-echo");
    EXPECT_EQ(hello.input_shape, (std::vector<uint64_t>{3, 560, 560}));
    EXPECT_EQ(hello.num_queries, 300u);
    EXPECT_EQ(hello.num_classes, 91u);
    ASSERT_EQ(hello.labels.size(), 91u);
    EXPECT_EQ(hello.labels[0], "N/A");
    EXPECT_EQ(hello.labels[90], "label-90");
}

TEST_F(sidecar, infer_returns_the_engines_outputs_and_ping_works) {
    sidecar_proc p;
    start(p, {"RFDETR_TEST_ECHO_FORWARD_MS=20"});
    client c;
    ASSERT_TRUE(c.open(socket_));
    const auto px = ramp_pixels();
    const auto t0 = clk::now();
    c.send_msg(make_infer(5, px));
    message              r;
    std::vector<uint8_t> s;
    ASSERT_TRUE(c.recv_msg(r, s));
    const double round_trip_ms = std::chrono::duration<double, std::milli>(clk::now() - t0).count();
    EXPECT_EQ(r.id, 5u);
    ASSERT_TRUE(r.ok) << r.error_message;
    const rfdetr::byte_view rl = reply_output(r, "logits"), rb = reply_output(r, "pred_boxes");
    ASSERT_EQ(rl.size, 300u * 91u * 4u);
    ASSERT_EQ(rb.size, 300u * 4u * 4u);
    std::vector<float> logits(300 * 91), boxes(300 * 4);
    std::memcpy(logits.data(), rl.data, rl.size);
    std::memcpy(boxes.data(), rb.data, rb.size);
    for (size_t i = 0; i < logits.size(); i += 97) {
        ASSERT_EQ(logits[i], px[i] + 1.0f) << i;
    }
    for (size_t i = 0; i < boxes.size(); i++) {
        ASSERT_EQ(boxes[i], px[300 * 91 + i] * 0.5f) << i;
    }
    // forward_ms is the engine's forward, made to take at least 20 ms, and lies within the round trip.
    EXPECT_TRUE(r.has(rfdetr::WIRE_FIELD_FORWARD_MS));
    EXPECT_GE(r.forward_ms, 20.0);
    EXPECT_LE(r.forward_ms, round_trip_ms);
    c.send_msg(make_request(6, rfdetr::wire_op::WIRE_OP_PING));
    ASSERT_TRUE(c.recv_msg(r, s));
    EXPECT_EQ(r.id, 6u);
    EXPECT_TRUE(r.ok);
    EXPECT_EQ(r.fields, rfdetr::WIRE_FIELD_OK) << "a ping reply carries exactly ok";
}

TEST_F(sidecar, request_errors_are_replied_and_the_connection_stays_open) {
    sidecar_proc p;
    start(p);
    client c;
    ASSERT_TRUE(c.open(socket_));
    message              r;
    std::vector<uint8_t> s;

    const std::vector<uint8_t> unknown_op = {0x0a, 0, 0, 0, 0x82, 0xa2, 'i', 'd', 0x03, 0xa2, 'o', 'p', 0xa1, 'x'};
    c.send_raw(unknown_op);
    ASSERT_TRUE(c.recv_msg(r, s));
    EXPECT_EQ(r.id, 3u);
    EXPECT_FALSE(r.ok);
    EXPECT_EQ(r.error_code, rfdetr::wire_error::WIRE_ERROR_UNKNOWN_OP);
    EXPECT_NE(r.error_message.find("unknown op 'x'"), std::string::npos) << r.error_message;

    std::vector<float> small(10, 0.0f);
    c.send_msg(make_infer(4, small));
    ASSERT_TRUE(c.recv_msg(r, s));
    EXPECT_EQ(r.id, 4u);
    EXPECT_EQ(r.error_code, rfdetr::wire_error::WIRE_ERROR_FIELD);
    EXPECT_NE(r.error_message.find("expected 3763200"), std::string::npos) << r.error_message;

    auto px = ramp_pixels();
    px[0]   = rfdetr::k_test_echo_throw;
    c.send_msg(make_infer(5, px));
    ASSERT_TRUE(c.recv_msg(r, s));
    EXPECT_EQ(r.id, 5u);
    EXPECT_EQ(r.error_code, rfdetr::wire_error::WIRE_ERROR_FORWARD);
    EXPECT_NE(r.error_message.find("asked to fail"), std::string::npos) << r.error_message;

    c.send_msg(make_request(6, rfdetr::wire_op::WIRE_OP_PING));
    ASSERT_TRUE(c.recv_msg(r, s));
    EXPECT_EQ(r.id, 6u);
    EXPECT_TRUE(r.ok);
}

TEST_F(sidecar, framing_errors_get_E_FRAME_then_close_and_the_sidecar_serves_on) {
    sidecar_proc p;
    start(p);
    const std::vector<std::vector<uint8_t>> bad = {
        {0, 0, 0, 0},                                                      // zero length
        {0x01, 0x00, 0x01, 0x0c},                                          // 201392129: over the cap
        {0x09, 0, 0, 0, 0x81, 0xa2, 'i', 'd', 0x01, 0xc0, 0xc0, 0xc0, 0xc0},  // trailing bytes
        {0x01, 0, 0, 0, 0xc1},                                             // invalid MessagePack
    };
    for (const auto & frame : bad) {
        client c;
        ASSERT_TRUE(c.open(socket_));
        c.send_raw(frame);
        message              r;
        std::vector<uint8_t> s;
        ASSERT_TRUE(c.recv_msg(r, s));
        EXPECT_EQ(r.id, 0u);
        EXPECT_EQ(r.error_code, rfdetr::wire_error::WIRE_ERROR_FRAME);
        EXPECT_TRUE(c.at_eof()) << "the connection must close after a framing error";
    }
    EXPECT_TRUE(serves_a_ping(socket_, 1));
    EXPECT_EQ(p.wait_exit(0), -1) << "still running";
}

TEST_F(sidecar, ping_overtakes_a_running_forward_and_clients_come_and_go) {
    sidecar_proc p;
    gate         g(dir_);
    start_gated(p, g);
    const int warm = p.gate_arrivals();
    client    a, b;
    ASSERT_TRUE(a.open(socket_));
    ASSERT_TRUE(b.open(socket_));
    const auto px = ramp_pixels();
    a.send_msg(make_infer(10, px));
    ASSERT_TRUE(p.wait_gate_arrivals(warm + 1)) << "forward 10 never reached the engine: " << p.err_text;
    // Forward 10 is held on the engine until the gate opens: both pings are answered while it runs.
    a.send_msg(make_request(11, rfdetr::wire_op::WIRE_OP_PING));
    b.send_msg(make_request(12, rfdetr::wire_op::WIRE_OP_PING));
    message              r;
    std::vector<uint8_t> s;
    ASSERT_TRUE(a.recv_msg(r, s));
    EXPECT_EQ(r.id, 11u) << "the ping reply must arrive before the infer reply";
    ASSERT_TRUE(b.recv_msg(r, s));
    EXPECT_EQ(r.id, 12u);
    g.release();
    ASSERT_TRUE(a.recv_msg(r, s));
    EXPECT_EQ(r.id, 10u);
    EXPECT_TRUE(r.ok);

    // A client leaving (even with a forward on the engine and one queued) never stops the sidecar.
    b.send_msg(make_infer(13, px));
    b.send_msg(make_infer(14, px));
    ASSERT_TRUE(p.wait_gate_arrivals(warm + 2)) << "forward 13 never reached the engine: " << p.err_text;
    close(b.fd);
    b.fd = -1;
    client c;
    ASSERT_TRUE(c.open(socket_));
    c.send_msg(make_request(15, rfdetr::wire_op::WIRE_OP_PING));
    ASSERT_TRUE(c.recv_msg(r, s));
    EXPECT_EQ(r.id, 15u);
    g.release(2);
    c.send_msg(make_request(16, rfdetr::wire_op::WIRE_OP_PING));
    ASSERT_TRUE(c.recv_msg(r, s));
    EXPECT_EQ(r.id, 16u);
    EXPECT_EQ(p.wait_exit(0), -1) << "still running";
}

TEST_F(sidecar, shutdown_op_answers_then_exits_0_and_removes_the_socket) {
    sidecar_proc p;
    start(p);
    client c;
    ASSERT_TRUE(c.open(socket_));
    c.send_msg(make_request(2, rfdetr::wire_op::WIRE_OP_SHUTDOWN));
    message              r;
    std::vector<uint8_t> s;
    ASSERT_TRUE(c.recv_msg(r, s));
    EXPECT_EQ(r.id, 2u);
    EXPECT_TRUE(r.ok);
    EXPECT_EQ(p.wait_exit(), 0) << p.err_text;
    EXPECT_FALSE(file_exists(socket_));
}

TEST_F(sidecar, sigterm_finishes_the_forward_in_progress_and_refuses_queued_ones) {
    sidecar_proc p;
    gate         g(dir_);
    start_gated(p, g);
    const int warm = p.gate_arrivals();
    client    c;
    ASSERT_TRUE(c.open(socket_));
    const auto px = ramp_pixels();
    c.send_msg(make_infer(1, px));
    c.send_msg(make_infer(2, px));
    c.send_msg(make_request(3, rfdetr::wire_op::WIRE_OP_PING));
    message              r;
    std::vector<uint8_t> s;
    // The ping is answered after both infers were read (one connection's frames are read in order).
    ASSERT_TRUE(c.recv_msg(r, s));
    EXPECT_EQ(r.id, 3u);
    ASSERT_TRUE(p.wait_gate_arrivals(warm + 1)) << "forward 1 never reached the engine: " << p.err_text;
    kill(p.pid, SIGTERM);
    // Forward 1 is still held on the engine: the queued one is refused first.
    ASSERT_TRUE(c.recv_msg(r, s));
    EXPECT_EQ(r.id, 2u);
    EXPECT_FALSE(r.ok);
    EXPECT_EQ(r.error_code, rfdetr::wire_error::WIRE_ERROR_STOPPING) << "the queued forward is answered E_STOPPING";
    g.release();
    ASSERT_TRUE(c.recv_msg(r, s));
    EXPECT_EQ(r.id, 1u);
    EXPECT_TRUE(r.ok) << "the forward in progress is finished and answered: " << r.error_message;
    EXPECT_TRUE(c.at_eof());
    EXPECT_EQ(p.wait_exit(), 0) << p.err_text;
    EXPECT_FALSE(file_exists(socket_));
}

TEST_F(sidecar, a_stop_removes_the_socket_directories_it_created_and_only_those) {
    {
        sidecar_proc p;
        socket_ = dir_ + "/a/b/s.sock";  // neither a nor a/b exists
        start(p);
        ASSERT_TRUE(file_exists(dir_ + "/a/b"));
        kill(p.pid, SIGTERM);
        EXPECT_EQ(p.wait_exit(), 0) << p.err_text;
        EXPECT_FALSE(file_exists(dir_ + "/a")) << "an empty socket directory the sidecar made was left behind";
    }
    {
        mkdir((dir_ + "/mine").c_str(), 0700);
        sidecar_proc p;
        socket_ = dir_ + "/mine/sub/s.sock";
        start(p);
        kill(p.pid, SIGTERM);
        EXPECT_EQ(p.wait_exit(), 0) << p.err_text;
        EXPECT_FALSE(file_exists(dir_ + "/mine/sub"));
        EXPECT_TRUE(file_exists(dir_ + "/mine")) << "a directory that was there before is not the sidecar's to remove";
    }
    {
        sidecar_proc p;  // a start that fails after creating the directory removes it too
        p.spawn({"--socket", dir_ + "/c/s.sock", "--engine", "test-echo", "--weights", dir_},
                {"RFDETR_TEST_ECHO_LOAD_FAIL=1"});
        EXPECT_EQ(p.wait_exit(), 1);
        EXPECT_FALSE(file_exists(dir_ + "/c"));
    }
}

TEST_F(sidecar, stale_socket_is_replaced_and_a_live_one_is_refused) {
    {
        // A stale socket file: bound, then its owner went away.
        mkdir((dir_ + "/run").c_str(), 0700);
        int         fd = socket(AF_UNIX, SOCK_STREAM, 0);
        sockaddr_un a{};
        a.sun_family = AF_UNIX;
        std::strncpy(a.sun_path, socket_.c_str(), sizeof(a.sun_path) - 1);
        ASSERT_EQ(bind(fd, reinterpret_cast<sockaddr *>(&a), sizeof(a)), 0);
        close(fd);
        ASSERT_TRUE(file_exists(socket_));
    }
    sidecar_proc p;
    start(p);
    EXPECT_NE(p.drain_stderr().find("replaced the stale socket"), std::string::npos);

    sidecar_proc q;
    q.spawn({"--socket", socket_, "--engine", "test-echo", "--weights", dir_});
    EXPECT_EQ(q.wait_exit(), 1);
    EXPECT_NE(q.err_text.find("another process is listening on '" + socket_ + "'"), std::string::npos) << q.err_text;
    EXPECT_EQ(q.wait_ready(100), "") << "a failed start prints nothing on stdout";
    client c;
    EXPECT_TRUE(c.open(socket_)) << "the live sidecar keeps its socket";
}

TEST_F(sidecar, startup_failures_exit_nonzero_with_one_line) {
    {
        sidecar_proc p;
        p.spawn({"--socket", socket_, "--engine", "test-echo", "--weights", dir_}, {"RFDETR_TEST_ECHO_LOAD_FAIL=1"});
        EXPECT_EQ(p.wait_exit(), 1);
        EXPECT_EQ(std::count(p.err_text.begin(), p.err_text.end(), '\n'), 1) << p.err_text;
        EXPECT_NE(p.err_text.find("engine 'test-echo' failed to start"), std::string::npos) << p.err_text;
        EXPECT_NE(p.err_text.find("RFDETR_TEST_ECHO_LOAD_FAIL=1; unset it"), std::string::npos) << p.err_text;
        EXPECT_FALSE(file_exists(socket_)) << "a failed start leaves no socket behind";
    }
    {
        sidecar_proc p;
        p.spawn({"--socket", socket_, "--engine", "nope", "--weights", dir_});
        EXPECT_EQ(p.wait_exit(), 2);
        EXPECT_NE(p.err_text.find("--engine 'nope'"), std::string::npos) << p.err_text;
        EXPECT_NE(p.err_text.find("test-echo"), std::string::npos) << p.err_text;
    }
    {
        sidecar_proc p;
        p.spawn({"--socket", socket_, "--engine", "test-echo", "--weights", dir_ + "/missing"});
        EXPECT_EQ(p.wait_exit(), 1);
        EXPECT_NE(p.err_text.find("/missing' does not exist"), std::string::npos) << p.err_text;
    }
}

TEST_F(sidecar, usage_errors_exit_2_naming_the_flag) {
    struct usage_case {
        std::vector<std::string> args;
        std::vector<std::string> env;
        std::string              needle;
    };
    const std::vector<usage_case> cases = {
        {{"--bogus"}, {}, "unknown flag '--bogus'"},
        {{"--weights", "/tmp", "--threads", "two"}, {}, "--threads 'two'"},
        {{"--weights", "/tmp", "--device-id=-1"}, {}, "--device-id '-1'"},
        {{"--weights", "/tmp", "--precision", "fp16"}, {}, "--precision 'fp16'"},
        {{"--weights", "/tmp", "--socket"}, {}, "--socket needs a value"},
        {{"--socket", "/tmp/x.sock"}, {}, "--weights DIR is required"},
        {{"--weights", "/tmp"}, {"RFDETR_THREADS=lots"}, "RFDETR_THREADS='lots'"},
    };
    for (const auto & uc : cases) {
        sidecar_proc p;
        p.spawn(uc.args, uc.env);
        EXPECT_EQ(p.wait_exit(), 2) << uc.needle;
        EXPECT_NE(p.err_text.find(uc.needle), std::string::npos) << p.err_text;
    }
    sidecar_proc h;
    h.spawn({"--help"});
    EXPECT_EQ(h.wait_exit(), 0);
    h.wait_ready(500);
    EXPECT_NE(h.out_text.find("usage: rfdetr-sidecar"), std::string::npos);
    sidecar_proc v;
    v.spawn({"--version"});
    EXPECT_EQ(v.wait_exit(), 0);
    v.wait_ready(500);
    EXPECT_EQ(v.out_text, "rfdetr-sidecar 0.1.0 (protocol 4)\n");
}

// Binds a datagram socket (path or abstract) and returns what arrives within timeout_ms.
std::vector<std::string> collect_notify(int fd, int timeout_ms, const std::string & until) {
    std::vector<std::string> got;
    const auto               end = clk::now() + std::chrono::milliseconds(timeout_ms);
    while (clk::now() < end) {
        pollfd pf{fd, POLLIN, 0};
        if (poll(&pf, 1, 50) > 0) {
            char    buf[256];
            ssize_t n = recv(fd, buf, sizeof(buf), 0);
            if (n > 0) {
                got.emplace_back(buf, static_cast<size_t>(n));
                if (got.back() == until) break;
            }
        }
    }
    return got;
}

TEST_F(sidecar, notify_socket_gets_ready_watchdog_and_stopping) {
    for (bool abstract : {false, true}) {
        const std::string name = abstract ? "rfdetr-test-notify-" + std::to_string(getpid()) : dir_ + "/notify.sock";
        int               fd   = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
        sockaddr_un       a{};
        a.sun_family = AF_UNIX;
        socklen_t len;
        if (abstract) {
            std::memcpy(a.sun_path + 1, name.data(), name.size());
            len = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + 1 + name.size());
        } else {
            std::strncpy(a.sun_path, name.c_str(), sizeof(a.sun_path) - 1);
            len = sizeof(a);
        }
        ASSERT_EQ(bind(fd, reinterpret_cast<sockaddr *>(&a), len), 0) << std::strerror(errno);
        const std::string env = "NOTIFY_SOCKET=" + (abstract ? "@" + name : name);
        {
            sidecar_proc p;
            start(p, {env, "WATCHDOG_USEC=200000"});
            auto got = collect_notify(fd, 2000, "WATCHDOG=1");
            ASSERT_GE(got.size(), 2u) << (abstract ? "abstract" : "path");
            EXPECT_EQ(got[0], "READY=1");
            EXPECT_EQ(got.back(), "WATCHDOG=1");
            kill(p.pid, SIGTERM);
            got = collect_notify(fd, 3000, "STOPPING=1");
            ASSERT_FALSE(got.empty());
            EXPECT_EQ(got.back(), "STOPPING=1");
            EXPECT_EQ(p.wait_exit(), 0);
        }
        close(fd);
    }
}

TEST_F(sidecar, socket_activation_serves_fd_3_and_leaves_the_file_to_systemd) {
    mkdir((dir_ + "/run").c_str(), 0700);
    int         lfd = socket(AF_UNIX, SOCK_STREAM, 0);
    sockaddr_un a{};
    a.sun_family = AF_UNIX;
    std::strncpy(a.sun_path, socket_.c_str(), sizeof(a.sun_path) - 1);
    ASSERT_EQ(bind(lfd, reinterpret_cast<sockaddr *>(&a), sizeof(a)), 0);
    ASSERT_EQ(listen(lfd, 8), 0);
    sidecar_proc p;
    p.spawn({"--engine", "test-echo", "--weights", dir_}, {}, lfd);
    ASSERT_EQ(p.wait_ready().rfind("READY ", 0), 0u) << p.drain_stderr();
    EXPECT_EQ(p.ready["socket"], socket_);
    client c;
    ASSERT_TRUE(c.open(socket_));
    kill(p.pid, SIGTERM);
    EXPECT_EQ(p.wait_exit(), 0);
    EXPECT_TRUE(file_exists(socket_)) << "systemd owns the socket file";
    close(lfd);
}

TEST_F(sidecar, exit_with_parent_stops_cleanly_when_the_parent_dies) {
    int out[2];
    ASSERT_EQ(pipe(out), 0);
    const pid_t mid = fork();
    ASSERT_GE(mid, 0);
    if (mid == 0) {
        // The intermediate parent: starts the sidecar, waits to be told to die.
        const pid_t sc = fork();
        if (sc == 0) {
            dup2(out[1], 1);
            const int devnull = ::open("/dev/null", O_WRONLY);
            dup2(devnull, 2);
            execl(RFDETR_SIDECAR_TEST_BIN, RFDETR_SIDECAR_TEST_BIN, "--socket", socket_.c_str(), "--engine", "test-echo",
                  "--weights", dir_.c_str(), "--exit-with-parent", static_cast<char *>(nullptr));
            _exit(127);
        }
        pause();
        _exit(0);
    }
    close(out[1]);
    sidecar_proc reader;  // only to reuse wait_ready on the pipe
    reader.out_fd = out[0];
    ASSERT_EQ(reader.wait_ready().rfind("READY ", 0), 0u);
    const pid_t sc = reader.ready["pid"].get<pid_t>();
    ASSERT_TRUE(file_exists(socket_));
    kill(mid, SIGKILL);
    waitpid(mid, nullptr, 0);
    const auto end = clk::now() + std::chrono::seconds(10);
    while (file_exists(socket_) && clk::now() < end) {
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    EXPECT_FALSE(file_exists(socket_)) << "the orphaned sidecar must stop and remove its socket";
    while (process_alive(sc) && clk::now() < end) {
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    EXPECT_FALSE(process_alive(sc)) << "sidecar pid " << sc << " still alive";
    if (process_alive(sc)) kill(sc, SIGKILL);
}

}  // namespace
