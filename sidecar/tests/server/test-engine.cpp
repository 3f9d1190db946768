#include "test-engine.h"

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <string>
#include <sys/stat.h>
#include <thread>
#include <unistd.h>
#include <utility>

namespace rfdetr {

namespace {

class test_echo_engine : public engine {
  public:
    // sleep_ms < 0: the echo engine (host cores, RFDETR_TEST_ECHO_FORWARD_MS); else the sleeping stand-in.
    test_echo_engine(int sleep_ms, std::string card) : sleep_ms_(sleep_ms), card_(std::move(card)) {
        if (const char * t = std::getenv("RFDETR_TEST_ECHO_TASK"); t && *t) {
            task_ = t;
            task_outputs(task_, head_dims{k_num_queries, k_test_echo_classes, 560});  // throws for an unknown task
        }
        labels_.push_back("N/A");
        for (int i = 1; i < k_test_echo_classes; i++) {
            labels_.push_back("label-" + std::to_string(i));
        }
        if (const char * g = std::getenv("RFDETR_TEST_GATE"); g && *g) {
            // O_RDWR: the open never waits for a writer; reads wait for the test's bytes.
            gate_fd_ = ::open(g, O_RDWR | O_CLOEXEC);
            if (gate_fd_ < 0) {
                throw error(std::string("test_engine_create: cannot open RFDETR_TEST_GATE '") + g + "': " + std::strerror(errno));
            }
        }
    }
    ~test_echo_engine() override {
        if (gate_fd_ >= 0) ::close(gate_fd_);
    }
    std::string name() const override { return sleep_ms_ < 0 ? "test-echo" : "test-sleep"; }
    std::string device() const override {
        const std::string what = sleep_ms_ < 0 ? "test double (deterministic echo" : "test double (echo after a fixed " + std::to_string(sleep_ms_) + " ms, off the host's cores";
        return what + (card_.empty() ? ")" : ", card " + card_ + ")");
    }
    int num_queries() const override { return k_num_queries; }
    int num_classes() const override { return k_test_echo_classes; }
    int input_size() const override { return 560; }
    std::string variant() const override { return "base"; }  // Base's input side, above
    const std::vector<std::string> & labels() const override { return labels_; }
    std::string task() const override { return task_; }
    std::string precision() const override { return "fp32"; }

    void forward(const float * px, output_buffers & out) override {
        if (gate_fd_ >= 0) {
            std::fprintf(stderr, "test_engine_forward: forward %d at the gate\n", ++forwards_);
            char    b = 0;
            ssize_t n = 0;
            while ((n = ::read(gate_fd_, &b, 1)) < 0 && errno == EINTR) {
            }
            if (n != 1) throw error("test_engine_forward: the RFDETR_TEST_GATE FIFO closed");
        }
        if (px[0] == k_test_echo_throw) {
            throw error("test-echo: forward asked to fail by its input");
        }
        if (px[0] == k_test_echo_abort) {
            std::abort();
        }
        if (px[0] == k_test_echo_hang) {
            std::this_thread::sleep_for(std::chrono::hours(1));
        }
        if (const char * ms = std::getenv("RFDETR_TEST_ECHO_FORWARD_MS"); ms && sleep_ms_ < 0) {
            std::this_thread::sleep_for(std::chrono::milliseconds(std::atoi(ms)));
        }
        if (sleep_ms_ > 0) {
            std::this_thread::sleep_for(std::chrono::milliseconds(sleep_ms_));
        }
        if (px[0] == k_test_echo_sleep) {
            // Tests wait for this line to know the forward is in progress.
            std::fprintf(stderr, "test_engine_forward: sleeping %d ms as the input asks\n", static_cast<int>(px[1]));
            std::this_thread::sleep_for(std::chrono::milliseconds(static_cast<int>(px[1])));
        }
        float * logits = out.at("logits");
        float * boxes  = out.at("pred_boxes");
        const int nl = k_num_queries * k_test_echo_classes;
        for (int i = 0; i < nl; i++) {
            logits[i] = px[i] + 1.0f;
        }
        for (int i = 0; i < k_num_queries * 4; i++) {
            boxes[i] = px[nl + i] * 0.5f;
        }
        if (task_ == "segment") {
            const auto &  rows = out.rows();  // after the logits, as a real engine asks
            float *       m    = out.at("pred_masks");
            const size_t  mm   = static_cast<size_t>(k_test_echo_mask_side) * k_test_echo_mask_side;
            for (size_t r = 0; r < rows.size(); r++) {
                for (size_t i = 0; i < mm; i++) {
                    m[r * mm + i] = static_cast<float>(rows[r]) + static_cast<float>(i % 4) * 0.25f;
                }
            }
        }
    }

  private:
    int                      sleep_ms_;
    std::string              card_;
    std::vector<std::string> labels_;
    std::string              task_ = "detect";
    int                      gate_fd_  = -1;
    int                      forwards_ = 0;
};


// The card this sidecar was given (TT_VISIBLE_DEVICES, as the server's pool sets it) must exist as
// $RFDETR_TT_DEVICE_DIR/<id> (default /dev/tenstorrent/<id>), as the tt engine's device open needs: a test
// stand-in for "this card is missing" that fails the same way (a startup failure naming the card).
std::string check_card() {
    const char * id = std::getenv("TT_VISIBLE_DEVICES");
    if (!id || !*id) {
        return "";
    }
    const char *      dir  = std::getenv("RFDETR_TT_DEVICE_DIR");
    const std::string node = std::string(dir && *dir ? dir : "/dev/tenstorrent") + "/" + id;
    struct stat       st{};
    if (stat(node.c_str(), &st) != 0) {
        throw error("test engine: could not open Tenstorrent device " + std::string(id) + ": " + node +
                    " does not exist (TT_VISIBLE_DEVICES=" + id + "); check the card with tt-smi");
    }
    return id;
}

void check_weights_dir(const std::string & weights_dir) {
    struct stat st{};
    if (stat(weights_dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) {
        throw error("test-echo: weights directory '" + weights_dir + "' does not exist; pass an existing --weights DIR");
    }
    if (const char * ms = std::getenv("RFDETR_TEST_ECHO_LOAD_MS")) {
        std::this_thread::sleep_for(std::chrono::milliseconds(std::atoi(ms)));
    }
    if (const char * f = std::getenv("RFDETR_TEST_ECHO_STDOUT"); f && std::string(f) == "1") {
        // What ttnn's logger does: lines on stdout while loading. They must not reach the READY channel.
        std::printf("test engine: a log line written to stdout while loading\n");
        std::fflush(stdout);
    }
    if (const char * f = std::getenv("RFDETR_TEST_ECHO_LOAD_FAIL"); f && std::string(f) == "1") {
        throw error("test-echo: loading failed because RFDETR_TEST_ECHO_LOAD_FAIL=1; unset it");
    }
}

}  // namespace

std::unique_ptr<engine> test_echo_create(const std::string & weights_dir, const engine_options &) {
    check_weights_dir(weights_dir);
    return std::make_unique<test_echo_engine>(-1, check_card());
}

std::unique_ptr<engine> test_sleep_create(const std::string & weights_dir, const engine_options &) {
    check_weights_dir(weights_dir);
    int ms = 8;
    if (const char * v = std::getenv("RFDETR_TEST_FORWARD_MS"); v && *v) {
        char * end = nullptr;
        const long n = std::strtol(v, &end, 10);
        if (*end != '\0' || n < 0 || n > 600000) {
            throw error(std::string("test-sleep: RFDETR_TEST_FORWARD_MS='") + v + "' is not a time in ms from 0 to 600000");
        }
        ms = static_cast<int>(n);
    }
    return std::make_unique<test_echo_engine>(ms, check_card());
}

engine_table test_engine_table() {
    engine_table t = engine_registry();
    t.push_back({"test-echo", {"fp32"}, true, test_echo_create, nullptr});
    t.push_back({"test-sleep", {"fp32"}, false, test_sleep_create, nullptr});
    return t;
}

}  // namespace rfdetr
