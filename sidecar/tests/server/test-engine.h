// Test-double engines, linked only into the test build of the sidecar (rfdetr-sidecar-test), never into the
// product binary. Their outputs are a fixed function of the input so clients can check them, and sentinel
// inputs make a forward fail, crash, hang or sleep.
//   "test-echo":  its registry row says it computes on the host's cores (like cpu): the sidecar resizes on the
//                 forward thread.
//   "test-sleep": a TT-like stand-in: every forward sleeps RFDETR_TEST_FORWARD_MS (default 8) and its row says
//                 it does not use the host's cores, so the sidecar resizes request N+1 during forward N.
#pragma once

#include "engines/registry.h"

namespace rfdetr {

constexpr int k_test_echo_classes   = 91;
constexpr int k_test_echo_mask_side = 140;  // 560 / 4

// pixel_values[0] sentinels.
constexpr float k_test_echo_throw = -1001.0f;  // forward throws rfdetr::error
constexpr float k_test_echo_abort = -1002.0f;  // forward calls abort() (a crash)
constexpr float k_test_echo_hang  = -1003.0f;  // forward sleeps for an hour
constexpr float k_test_echo_sleep = -1004.0f;  // forward sleeps pixel_values[1] milliseconds

// logits[i] = pixel_values[i] + 1, pred_boxes[i] = pixel_values[300*91 + i] * 0.5.
// RFDETR_TEST_ECHO_TASK=segment declares the task `segment` (the hello's variant stays "base"): pred_masks
// [300, 140, 140] selected by rows, element i of the row of query q = q + (i % 4) * 0.25.
// Env: RFDETR_TEST_ECHO_LOAD_FAIL=1 makes loading fail; RFDETR_TEST_ECHO_LOAD_MS=N sleeps while loading;
// RFDETR_TEST_ECHO_FORWARD_MS=N sleeps in every forward (warm-up included); RFDETR_TEST_ECHO_STDOUT=1 prints a
// line on stdout while loading (as ttnn's logger does). Both engines, given a card in TT_VISIBLE_DEVICES, fail
// to load unless $RFDETR_TT_DEVICE_DIR/<card> (default /dev/tenstorrent/<card>) exists.
// Both engines: RFDETR_TEST_GATE=FIFO makes every forward (warm-up included) print
// "test_engine_forward: forward N at the gate" on stderr, then wait for one byte from the FIFO, so a test holds a
// forward on the engine for as long as it needs and knows when it got there (sidecar-harness.h, gate).
std::unique_ptr<engine> test_echo_create(const std::string & weights_dir, const engine_options & opts);

// Same outputs and sentinels; forward sleeps RFDETR_TEST_FORWARD_MS (default 8) ms; not on the host's cores.
std::unique_ptr<engine> test_sleep_create(const std::string & weights_dir, const engine_options & opts);

// The product registry plus the two test engines (fp32; test-echo on host cores, test-sleep not): the table
// rfdetr-sidecar-test serves from and lists.
engine_table test_engine_table();

}  // namespace rfdetr
