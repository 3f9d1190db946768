#include "golden-file.h"

#include <nlohmann/json.hpp>

#include <cstdlib>
#include <cstring>
#include <fstream>
#include <stdexcept>
#include <sys/stat.h>

namespace rfdetr::test {

int64_t golden_tensor::numel() const {
    int64_t n = 1;
    for (auto d : shape) n *= d;
    return n;
}

std::map<std::string, golden_tensor> read_golden(const std::string & path) {
    std::ifstream in(path, std::ios::binary);
    if (!in) throw std::runtime_error("read_golden: cannot open " + path);
    uint64_t hlen = 0;
    in.read(reinterpret_cast<char *>(&hlen), 8);
    if (!in || hlen > (1u << 26)) throw std::runtime_error("read_golden: bad header length in " + path);
    std::string header(hlen, '\0');
    in.read(header.data(), static_cast<std::streamsize>(hlen));
    const auto                           j    = nlohmann::json::parse(header);
    const std::streamoff                 base = 8 + static_cast<std::streamoff>(hlen);
    std::map<std::string, golden_tensor> out;
    for (auto it = j.begin(); it != j.end(); ++it) {
        if (it.key() == "__metadata__") continue;
        golden_tensor t;
        t.dtype            = it.value().at("dtype").get<std::string>();
        t.shape            = it.value().at("shape").get<std::vector<int64_t>>();
        const auto offsets = it.value().at("data_offsets").get<std::vector<int64_t>>();
        const int64_t n    = t.numel();
        const int64_t bytes = offsets.at(1) - offsets.at(0);
        in.seekg(base + offsets.at(0));
        if (t.dtype == "F32" && bytes == n * 4) {
            t.f32.resize(n);
            in.read(reinterpret_cast<char *>(t.f32.data()), bytes);
        } else if (t.dtype == "I64" && bytes == n * 8) {
            t.i64.resize(n);
            in.read(reinterpret_cast<char *>(t.i64.data()), bytes);
        } else {
            throw std::runtime_error("read_golden: " + path + ": tensor " + it.key() + " has dtype " + t.dtype +
                                     " and " + std::to_string(bytes) + " bytes; expected F32 or I64 matching its shape");
        }
        if (!in) throw std::runtime_error("read_golden: " + path + " is truncated at tensor " + it.key());
        out.emplace(it.key(), std::move(t));
    }
    return out;
}

namespace {
bool is_dir(const std::string & p) {
    struct stat st {};
    return stat(p.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}
}  // namespace

std::string shared_fixtures_dir() {
    if (const char * e = std::getenv("RFDETR_SHARED_FIXTURES"); e && *e) return is_dir(e) ? e : "";
    const std::string p = std::string(RFDETR_REPO_ROOT_DIR) + "/../shared/fixtures/rfdetr-synth";
    return is_dir(p) ? p : "";
}

std::string family_fixtures_dir() {
    if (const char * e = std::getenv("RFDETR_FAMILY_FIXTURES"); e && *e) return is_dir(e) ? e : "";
    const std::string p = std::string(RFDETR_REPO_ROOT_DIR) + "/../shared/fixtures/rfdetr-family";
    return is_dir(p) ? p : "";
}

std::string seg_fixtures_dir() {
    if (const char * e = std::getenv("RFDETR_SEG_FIXTURES"); e && *e) return is_dir(e) ? e : "";
    const std::string p = std::string(RFDETR_REPO_ROOT_DIR) + "/../shared/fixtures/rfdetr-seg";
    return is_dir(p) ? p : "";
}

// Tools that reuse this file without the ctest fixtures (bench/engine) leave the directory undefined.
#ifndef RFDETR_FAMILY_WEIGHTS_DIR
#define RFDETR_FAMILY_WEIGHTS_DIR ""
#endif

std::string family_weights_dir(const std::string & variant) {
    return std::string(RFDETR_FAMILY_WEIGHTS_DIR) + "/" + variant + "-seed-0x1";
}

std::string repo_fixtures_dir() { return std::string(RFDETR_REPO_ROOT_DIR) + "/test/fixtures/rfdetr-synth"; }

std::string test_weights_dir() {
    if (const char * e = std::getenv("RFDETR_TEST_WEIGHTS"); e && *e) return e;
    return RFDETR_TEST_WEIGHTS_DIR;
}

}  // namespace rfdetr::test
