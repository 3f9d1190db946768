// The sidecar's framing as transport behaviour on a real Unix socket: a declared length over the cap is
// refused at the header before anything is allocated, a frame stalled half-way is ended by the frame
// timeout, and replies a client does not read yet queue up whole. That the timeout never cuts a frame that
// keeps arriving, or a connection idle between frames, is not tested here: it could only be shown by racing
// sleeps against the timeout, a wall-clock gate.
#include "sidecar-harness.h"

#include <fstream>
#include <sys/resource.h>

namespace {

using namespace rfdetr_test;

// A /proc/PID/status field in kB (VmPeak, VmRSS, ...), or -1.
long proc_status_kb(pid_t pid, const std::string & field) {
    std::ifstream f("/proc/" + std::to_string(pid) + "/status");
    std::string   line;
    while (std::getline(f, line)) {
        if (line.rfind(field + ":", 0) == 0) {
            return std::stol(line.substr(field.size() + 1));
        }
    }
    return -1;
}

TEST_F(sidecar, a_length_over_the_cap_is_refused_at_the_header_before_allocating) {
    sidecar_proc p;
    start(p);
    const long peak_before = proc_status_kb(p.pid, "VmPeak");
    ASSERT_GT(peak_before, 0);
    for (const std::vector<uint8_t> & header : {std::vector<uint8_t>{0x01, 0x00, 0x01, 0x0c},   // cap + 1
                                              std::vector<uint8_t>{0xff, 0xff, 0xff, 0xff}}) {  // 4 GiB
        client c;
        ASSERT_TRUE(c.open(socket_));
        c.send_raw(header);  // the header only: the refusal cannot wait for (or make room for) a payload
        message              r;
        std::vector<uint8_t> s;
        ASSERT_TRUE(c.recv_msg(r, s, 3000)) << "no E_FRAME after the header alone";
        EXPECT_EQ(r.id, 0u);
        EXPECT_EQ(r.error_code, rfdetr::wire_error::WIRE_ERROR_FRAME);
        EXPECT_NE(r.error_message.find("exceeds the 201392128-byte cap"), std::string::npos) << r.error_message;
        EXPECT_TRUE(c.at_eof());
    }
    EXPECT_LT(proc_status_kb(p.pid, "VmPeak") - peak_before, 64 * 1024) << "address space grew for a refused frame";

    // A legal 201392128-byte declaration costs no resident memory until its bytes arrive.
    const long rss_before = proc_status_kb(p.pid, "VmRSS");
    client     big;
    ASSERT_TRUE(big.open(socket_));
    big.send_raw({0x00, 0x00, 0x01, 0x0c, 0x82});
    big.send_msg(make_request(1, rfdetr::wire_op::WIRE_OP_PING));  // 9 more bytes of the big frame
    ASSERT_TRUE(big.wait_consumed()) << "the sidecar never read the start of the big frame";
    EXPECT_LT(proc_status_kb(p.pid, "VmRSS") - rss_before, 32 * 1024) << "the declared payload was zero-filled";
    client c;
    ASSERT_TRUE(c.open(socket_)) << "the sidecar serves on";
}

TEST_F(sidecar, a_frame_the_sidecar_cannot_allocate_is_an_E_FRAME_not_a_crash) {
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
    GTEST_SKIP() << "sanitizer runtimes reserve terabytes of address space and abort on a failed allocation, so an "
                    "address-space cap cannot stand in for running out of memory there";
#endif
    sidecar_proc p;
    start(p);
    // Cap the running sidecar's address space a little above what it uses: a legal 201392128-byte frame
    // can no longer be allocated.
    const long vm_kb = proc_status_kb(p.pid, "VmSize");
    ASSERT_GT(vm_kb, 0);
    const rlimit lim{static_cast<rlim_t>(vm_kb + 64 * 1024) * 1024, static_cast<rlim_t>(vm_kb + 64 * 1024) * 1024};
    ASSERT_EQ(prlimit(p.pid, RLIMIT_AS, &lim, nullptr), 0) << std::strerror(errno);
    client c;
    ASSERT_TRUE(c.open(socket_));
    c.send_raw({0x00, 0x00, 0x01, 0x0c});
    message              r;
    std::vector<uint8_t> s;
    ASSERT_TRUE(c.recv_msg(r, s, 3000));
    EXPECT_EQ(r.error_code, rfdetr::wire_error::WIRE_ERROR_FRAME);
    EXPECT_NE(r.error_message.find("cannot allocate 201392128 bytes"), std::string::npos) << r.error_message;
    EXPECT_TRUE(c.at_eof());
    EXPECT_TRUE(serves_a_ping(socket_, 2));
}

TEST_F(sidecar, a_stalled_partial_frame_gets_E_FRAME_and_is_closed_after_the_frame_timeout) {
    sidecar_proc p;
    start(p, {}, {"--frame-timeout-ms", "300"});
    struct stall_case {
        std::vector<uint8_t> bytes;
        std::string          needle;
    };
    std::vector<uint8_t> part_payload = {100, 0, 0, 0};
    part_payload.resize(4 + 10, 0x90);
    const stall_case cases[] = {
        {{0x10, 0x00}, "received 2 of 4 length bytes, then nothing for 300 ms"},
        {part_payload, "received 10 of 100 payload bytes, then nothing for 300 ms"},
    };
    for (const auto & sc : cases) {
        // The message names the timeout that fired.
        client c;
        ASSERT_TRUE(c.open(socket_));
        c.send_raw(sc.bytes);
        message              r;
        std::vector<uint8_t> s;
        ASSERT_TRUE(c.recv_msg(r, s, 5000)) << sc.needle;
        EXPECT_EQ(r.error_code, rfdetr::wire_error::WIRE_ERROR_FRAME);
        EXPECT_NE(r.error_message.find(sc.needle), std::string::npos) << r.error_message;
        EXPECT_TRUE(c.at_eof()) << "the connection must close after the stall";
    }
    EXPECT_TRUE(serves_a_ping(socket_, 7));
}

TEST_F(sidecar, replies_a_client_reads_late_pile_up_and_arrive_whole_and_in_order) {
    // 16 replies of 114 KB are far more than the socket holds: written straight from the frame until the
    // socket is full, the rest queued, each byte once.
    sidecar_proc p;
    start(p);
    client c;
    ASSERT_TRUE(c.open(socket_));
    const auto px = ramp_pixels();
    constexpr uint64_t k_requests = 16;
    for (uint64_t id = 1; id <= k_requests; id++) {
        c.send_msg(make_infer(id, px));
    }
    for (uint64_t id = 1; id <= k_requests; id++) {
        message              r;
        std::vector<uint8_t> s;
        ASSERT_TRUE(c.recv_msg(r, s)) << "reply " << id << " did not arrive whole";
        ASSERT_EQ(r.id, id);
        ASSERT_TRUE(r.ok) << r.error_message;
        const rfdetr::byte_view rl = reply_output(r, "logits");
        ASSERT_EQ(rl.size, 300u * 91u * 4u);
        std::vector<float> logits(300 * 91);
        std::memcpy(logits.data(), rl.data, rl.size);
        for (size_t i = 0; i < logits.size(); i += 101) {
            ASSERT_EQ(logits[i], px[i] + 1.0f) << "reply " << id << ", logit " << i;
        }
    }
}

}  // namespace
