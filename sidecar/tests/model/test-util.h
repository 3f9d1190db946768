// Helpers for the model tests: checkpoint directories made from a header description, with sparse
// (all-zero) tensor data so a full 129 MB RF-DETR-base layout costs nothing to write.
#pragma once

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <stdexcept>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "common/error.h"
#include "model/checkpoint.h"
#include "model/schema.h"

namespace rfdetr_test {

struct fake_tensor {
    std::string          name;
    std::vector<int64_t> shape;
    std::string          dtype = "F32";
};

// The variant schema's tensors for `num_classes` classes.
inline std::vector<fake_tensor> schema_tensors(int num_classes = 91, const std::string & variant = "base") {
    std::vector<fake_tensor> out;
    for (const auto & st : rfdetr::schema_get(variant).tensors) {
        out.push_back({ st.name, st.shape_for(num_classes) });
    }
    return out;
}

inline int64_t numel(const std::vector<int64_t> & s) {
    int64_t n = 1;
    for (auto d : s) {
        n *= d;
    }
    return n;
}

// 8-byte length + JSON header (tensors laid out contiguously in the given order), padded to 8 + pad_extra.
inline std::string make_header(const std::vector<fake_tensor> & ts, uint64_t * data_bytes = nullptr,
                               size_t pad_to = 8) {
    nlohmann::ordered_json j;
    j["__metadata__"] = { { "format", "pt" } };
    uint64_t off      = 0;
    for (const auto & t : ts) {
        const int      esz = t.dtype == "F16" ? 2 : 4;
        const uint64_t n   = static_cast<uint64_t>(numel(t.shape)) * esz;
        j[t.name]          = { { "dtype", t.dtype }, { "shape", t.shape }, { "data_offsets", { off, off + n } } };
        off += n;
    }
    std::string text = j.dump();
    while ((8 + text.size()) % pad_to != 0) {
        text += ' ';
    }
    if (data_bytes) {
        *data_bytes = off;
    }
    std::string out(8, '\0');
    for (int i = 0; i < 8; i++) {
        out[i] = static_cast<char>((uint64_t(text.size()) >> (8 * i)) & 0xff);
    }
    return out + text;
}

inline std::string read_file(const std::string & path) {
    std::ifstream     in(path, std::ios::binary);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
}

inline void write_file(const std::string & path, const std::string & bytes) {
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

inline std::string fresh_dir(const std::string & name) {
    const std::string dir = std::string(RFDETR_TEST_TMP) + "/" + name;
    (void) !std::system(("rm -rf '" + dir + "' && mkdir -p '" + dir + "'").c_str());
    return dir;
}

// Writes DIR/model.safetensors = header + `data_bytes` zero bytes (sparse), truncated to `size` if given.
inline void write_sparse(const std::string & path, const std::string & header, uint64_t data_bytes,
                         int64_t size = -1) {
    write_file(path, header);
    const int64_t total = size >= 0 ? size : static_cast<int64_t>(header.size() + data_bytes);
    if (::truncate(path.c_str(), total) != 0) {
        throw std::runtime_error("truncate failed: " + path);
    }
}

// A checkpoint directory with the given tensors (zero data) and config.json text ("" = no config.json).
inline std::string make_checkpoint(const std::string & name, const std::vector<fake_tensor> & ts,
                                   const std::string & config) {
    const std::string dir = fresh_dir(name);
    uint64_t          data = 0;
    const std::string h    = make_header(ts, &data);
    write_sparse(dir + "/model.safetensors", h, data);
    if (!config.empty()) {
        write_file(dir + "/config.json", config);
    }
    return dir;
}

// config.json text: the COCO fixture config, with `edit` applied.
template <typename F> inline std::string coco_config(F edit) {
    nlohmann::ordered_json j = nlohmann::ordered_json::parse(read_file(RFDETR_COCO_CONFIG_JSON));
    edit(j);
    return j.dump(2);
}

inline std::string coco_config() {
    return coco_config([](nlohmann::ordered_json &) {});
}

// Opens DIR and returns the error message ("" when it loads).
inline std::string open_error(const std::string & dir) {
    try {
        rfdetr::checkpoint::open(dir);
    } catch (const rfdetr::error & e) {
        return e.what();
    }
    return "";
}

#define EXPECT_HAS(msg, fragment) EXPECT_NE((msg).find(fragment), std::string::npos) << "missing '" << (fragment) << "' in:\n" << (msg)

}  // namespace rfdetr_test
