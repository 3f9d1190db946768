// Reads the fixtures' golden.safetensors (F32 and I64 tensors) for the engine tests, and finds the fixtures.
// A test helper, not a checkpoint loader: engines read weights through model/checkpoint.h.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace rfdetr::test {

struct golden_tensor {
    std::string          dtype;  // "F32" | "I64"
    std::vector<int64_t> shape;
    std::vector<float>   f32;
    std::vector<int64_t> i64;
    int64_t              numel() const;
};

// Throws std::runtime_error naming the file on any malformed input.
std::map<std::string, golden_tensor> read_golden(const std::string & path);

// The shared per-stage fixtures: $RFDETR_SHARED_FIXTURES, else ../shared/fixtures/rfdetr-synth from the
// repo root. Empty when absent.
std::string shared_fixtures_dir();
// The family fixtures (one directory per variant): $RFDETR_FAMILY_FIXTURES, else
// ../shared/fixtures/rfdetr-family from the repo root. Empty when absent.
std::string family_fixtures_dir();
// The RF-DETR Seg fixtures (nano, small, medium, large): $RFDETR_SEG_FIXTURES, else
// ../shared/fixtures/rfdetr-seg from the repo root. Empty when absent.
std::string seg_fixtures_dir();
// The seed-1 synthetic checkpoint of a family variant written by the ctest fixture synth_family.
std::string family_weights_dir(const std::string & variant);
// test/fixtures/rfdetr-synth in this repository.
std::string repo_fixtures_dir();
// The seed-1 checkpoint the tests run on: $RFDETR_TEST_WEIGHTS, else the ctest fixture's directory.
std::string test_weights_dir();

}  // namespace rfdetr::test
