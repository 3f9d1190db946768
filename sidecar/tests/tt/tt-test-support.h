// Test support for the TT graph tests: a small safetensors reader for the goldens (F32 and I64), fixture paths,
// and skip-or-fail for missing fixtures. Checkpoints are opened with the product loader (checkpoint::open).
#pragma once

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

inline bool require_all() {
    const char * v = std::getenv("RFDETR_REQUIRE_ALL");
    return v && std::string(v) == "1";
}

// GTEST_SKIP with the reason, or FAIL under RFDETR_REQUIRE_ALL=1.
#define TT_SKIP_OR_FAIL(reason)                                                         \
    do {                                                                                \
        if (::rfdetr::tt_test::require_all()) {                                         \
            FAIL() << "RFDETR_REQUIRE_ALL=1 and a fixture is missing: " << (reason);    \
        }                                                                               \
        GTEST_SKIP() << (reason);                                                       \
    } while (0)

struct tt_golden_tensor {
    std::string          dtype;
    std::vector<int64_t> shape;
    std::vector<float>   f32;  // F32 data, or I64 converted to float (indices < 2^24)
    std::vector<int64_t> i64;
};

inline std::map<std::string, tt_golden_tensor> tt_read_safetensors(const std::string & path) {
    std::ifstream f(path, std::ios::binary);
    if (!f) {
        throw std::runtime_error("tt_read_safetensors: cannot open " + path);
    }
    uint64_t n = 0;
    f.read(reinterpret_cast<char *>(&n), 8);
    std::string header(n, '\0');
    f.read(&header[0], (std::streamsize)n);
    auto                                 h = nlohmann::json::parse(header);
    std::streampos                       start = f.tellg();
    f.seekg(0, std::ios::end);
    std::vector<char> body((size_t)(f.tellg() - start));
    f.seekg(start);
    f.read(body.data(), (std::streamsize)body.size());
    std::map<std::string, tt_golden_tensor>     out;
    for (auto it = h.begin(); it != h.end(); ++it) {
        if (it.key() == "__metadata__") {
            continue;
        }
        tt_golden_tensor t;
        t.dtype        = it.value()["dtype"].get<std::string>();
        t.shape        = it.value()["shape"].get<std::vector<int64_t>>();
        auto    off    = it.value()["data_offsets"].get<std::vector<uint64_t>>();
        size_t  bytes  = off[1] - off[0];
        const char * p = body.data() + off[0];
        if (t.dtype == "F32") {
            t.f32.resize(bytes / 4);
            std::memcpy(t.f32.data(), p, bytes);
        } else if (t.dtype == "I64") {
            t.i64.resize(bytes / 8);
            std::memcpy(t.i64.data(), p, bytes);
            t.f32.assign(t.i64.begin(), t.i64.end());
        } else {
            continue;
        }
        out.emplace(it.key(), std::move(t));
    }
    return out;
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

inline std::string shared_fixtures_dir() {
    if (const char * e = std::getenv("RFDETR_SHARED_FIXTURES")) {
        return e;
    }
    return std::string(RFDETR_TT_REPO_ROOT) + "/../shared/fixtures/rfdetr-synth";
}

inline std::string repo_fixtures_dir() {
    return std::string(RFDETR_TT_REPO_ROOT) + "/test/fixtures/rfdetr-synth";
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
