// Test support for the TT graph tests: the shared golden reader, fixture paths and skip-or-fail (tests/support),
// error measures. Checkpoints are opened with the product loader (checkpoint::open).
#pragma once

#include "golden-file.h"
#include "skip.h"
#include "model/checkpoint.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <memory>
#include <string>
#include <sys/stat.h>
#include <vector>

namespace rfdetr {
namespace tt_test {

inline bool path_exists(const std::string & p) {
    struct stat st;
    return ::stat(p.c_str(), &st) == 0;
}

using ::rfdetr::test::repo_fixtures_dir;
using ::rfdetr::test::shared_fixtures_dir;

using tt_golden_tensor = ::rfdetr::test::golden_tensor;

inline std::map<std::string, tt_golden_tensor> tt_read_safetensors(const std::string & path) {
    return ::rfdetr::test::read_golden(path);
}

// The seed-1 synthetic checkpoint: env RFDETR_TT_TEST_WEIGHTS, else the build's synth_seed1 fixture output.
inline std::string weights_dir() {
    if (const char * e = std::getenv("RFDETR_TT_TEST_WEIGHTS")) {
        return e;
    }
#ifdef RFDETR_SYNTH_SEED1_DIR
    return RFDETR_SYNTH_SEED1_DIR;
#else
    return "";
#endif
}

inline nlohmann::json read_json(const std::string & path) {
    std::ifstream f(path);
    if (!f) {
        throw std::runtime_error("read_json: cannot open " + path);
    }
    return nlohmann::json::parse(f);
}

struct max_err {
    double abs = 0.0;
    size_t at  = 0;
    bool   finite = true;
};

inline max_err max_abs_diff(const float * a, const float * b, size_t n) {
    max_err e;
    for (size_t i = 0; i < n; ++i) {
        if (!std::isfinite(a[i]) || !std::isfinite(b[i])) {
            e.finite = false;
            e.at     = i;
            return e;
        }
        double d = std::fabs((double)a[i] - (double)b[i]);
        if (d > e.abs) {
            e.abs = d;
            e.at  = i;
        }
    }
    return e;
}

// [1, C, H*W] channels-first golden -> [H*W, C] channels-last.
inline std::vector<float> to_channels_last(const std::vector<float> & cf, int C, int HW) {
    std::vector<float> cl((size_t)C * HW);
    for (int c = 0; c < C; ++c) {
        for (int i = 0; i < HW; ++i) {
            cl[(size_t)i * C + c] = cf[(size_t)c * HW + i];
        }
    }
    return cl;
}

}  // namespace tt_test
}  // namespace rfdetr
