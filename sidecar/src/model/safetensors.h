// The safetensors container: 8-byte LE header length N, N bytes of JSON, then the raw tensor bytes.
// safetensors_parse validates everything a loader relies on and names the file in every error.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace rfdetr {

struct st_tensor {
    std::string          name;
    std::string          dtype;   // "F32", ...
    std::vector<int64_t> shape;
    uint64_t             begin = 0;  // byte offsets relative to the data section
    uint64_t             end   = 0;
};

struct st_header {
    uint64_t                           header_bytes = 0;  // N
    uint64_t                           data_offset  = 0;  // 8 + N
    std::vector<st_tensor>             tensors;           // sorted by name (byte-wise)
    std::map<std::string, std::string> metadata;          // __metadata__ (string values)
};

// Upper bound on N; the RF-DETR-base header is ~45 kB.
constexpr uint64_t k_st_max_header_bytes = 100ull * 1024 * 1024;

// Parses and validates a whole safetensors file held in `bytes` (size = the file's size). Checks: the
// length prefix is sane, the header is a UTF-8 JSON object, every entry has a known dtype (only F32 is
// accepted: RF-DETR-base checkpoints are float32), a shape of non-negative ints, data_offsets [begin, end]
// with end - begin = numel * dtype size, inside the file; tensors neither overlap nor leave gaps and
// exactly fill the data section. Throws rfdetr::error "FILE: not a valid safetensors file: WHAT".
st_header safetensors_parse(const std::string & file, const uint8_t * bytes, size_t size);

// `s` cut to `n` characters with every byte outside printable ASCII replaced by '?': for quoting parser
// messages, which can echo arbitrary file bytes, in an error message.
std::string printable_clip(const std::string & s, size_t n);

// A read-only private mapping of a whole file. Throws rfdetr::error naming the file.
class mapped_file {
  public:
    explicit mapped_file(const std::string & path);
    ~mapped_file();
    mapped_file(const mapped_file &)             = delete;
    mapped_file & operator=(const mapped_file &) = delete;

    const uint8_t * data() const { return data_; }
    size_t          size() const { return size_; }

  private:
    const uint8_t * data_ = nullptr;
    size_t          size_ = 0;
};

}  // namespace rfdetr
