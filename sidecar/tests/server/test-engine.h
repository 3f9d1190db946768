// Test-double engines, linked only into the test build of the sidecar (rfdetr-sidecar-test), never into the
// product binary. Their outputs are a fixed function of the input so clients can check them, and sentinel
// inputs make a forward fail, crash, hang or sleep.
//   "test-echo":  says it computes on the host's cores (like cpu): the sidecar resizes on the forward thread.
//   "test-sleep": a TT-like stand-in: every forward sleeps RFDETR_TEST_FORWARD_MS (default 8) and it says it
//                 does not use the host's cores, so the sidecar resizes request N+1 during forward N.
#pragma once

#include "engines/engine.h"

namespace rfdetr {

constexpr int k_test_echo_classes = 91;

// pixel_values[0] sentinels.
constexpr float k_test_echo_throw = -1001.0f;  // forward throws rfdetr::error
constexpr float k_test_echo_abort = -1002.0f;  // forward calls abort() (a crash)
constexpr float k_test_echo_hang  = -1003.0f;  // forward sleeps for an hour
constexpr float k_test_echo_sleep = -1004.0f;  // forward sleeps pixel_values[1] milliseconds

// logits[i] = pixel_values[i] + 1, pred_boxes[i] = pixel_values[300*91 + i] * 0.5.
// Env: RFDETR_TEST_ECHO_LOAD_FAIL=1 makes loading fail; RFDETR_TEST_ECHO_LOAD_MS=N sleeps while loading;
// RFDETR_TEST_ECHO_FORWARD_MS=N sleeps in every forward (warm-up included); RFDETR_TEST_ECHO_STDOUT=1 prints a
// line on stdout while loading (as ttnn's logger does). Both engines, given a card in TT_VISIBLE_DEVICES, fail
// to load unless $RFDETR_TT_DEVICE_DIR/<card> (default /dev/tenstorrent/<card>) exists.
std::unique_ptr<engine> test_echo_create(const std::string & weights_dir, const engine_options & opts);

// Same outputs and sentinels; forward sleeps RFDETR_TEST_FORWARD_MS (default 8) ms; forward_uses_host_cores() false.
std::unique_ptr<engine> test_sleep_create(const std::string & weights_dir, const engine_options & opts);

}  // namespace rfdetr
