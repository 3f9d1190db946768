// libFuzzer target: the in-sidecar PNG reader (decode/png.cpp, png-rows.cpp) on arbitrary bytes, with the size
// the client would declare read from the file's own IHDR (as the server does), so the fuzzer reaches the chunk
// walk, inflate, unfiltering and conversion rather than the size check. Only decode_declined may leave it; any
// other exception, a crash or a sanitizer report is a finding.
#include "decode/decode.h"

#include <cstdint>
#include <cstring>
#include <vector>

namespace {

uint32_t be32(const uint8_t * p) {
  return (uint32_t(p[0]) << 24) | (uint32_t(p[1]) << 16) | (uint32_t(p[2]) << 8) | uint32_t(p[3]);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t * data, size_t size) {
  uint32_t w = 1, h = 1;
  if (size >= 24 && std::memcmp(data + 12, "IHDR", 4) == 0) {
    w = be32(data + 16);
    h = be32(data + 20);
  }
  // Sides the server would refuse never reach the decoder; a large image only costs time, not coverage.
  if (w < 1 || h < 1 || w > uint32_t(rfdetr::decode_max_side) || h > uint32_t(rfdetr::decode_max_side) ||
      uint64_t(w) * h > (uint64_t(1) << 22)) {
    return 0;
  }
  std::vector<uint8_t> out(size_t(w) * h * 3);
  try {
    rfdetr::decode_rgb_into(rfdetr::encoded_format::png, data, size, int(w), int(h), out.data());
  } catch (const rfdetr::decode_declined & e) {
    if (e.what()[0] == '\0') __builtin_trap();  // every decline must say why
  }
  return 0;
}
