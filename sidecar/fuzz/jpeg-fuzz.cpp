// libFuzzer target: the JPEG decode path (decode/jpeg.cpp over the system libjpeg-turbo) on arbitrary bytes,
// with the declared size read from the first SOF marker (as the server reads it). libjpeg-turbo itself is the
// distribution's uninstrumented build (OSS-Fuzz fuzzes it); what is fuzzed here is our wrapper: the error and
// warning longjmps, the scan limit, the colour-space and size checks and the row loop. Only decode_declined may
// leave it.
#include "decode/decode.h"

#include <cstdint>
#include <vector>

namespace {

bool is_sof(uint8_t m) { return m >= 0xC0 && m <= 0xCF && m != 0xC4 && m != 0xC8 && m != 0xCC; }

// The first SOFn's height and width (0x0 when there is none).
void sof_size(const uint8_t * d, size_t n, uint32_t & w, uint32_t & h) {
  for (size_t i = 2; i + 9 <= n; i++) {
    if (d[i] == 0xFF && is_sof(d[i + 1])) {
      h = (uint32_t(d[i + 5]) << 8) | d[i + 6];
      w = (uint32_t(d[i + 7]) << 8) | d[i + 8];
      return;
    }
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t * data, size_t size) {
  uint32_t w = 0, h = 0;
  sof_size(data, size, w, h);
  if (w == 0 || h == 0) w = h = 1;
  if (w > uint32_t(rfdetr::decode_max_side) || h > uint32_t(rfdetr::decode_max_side) || uint64_t(w) * h > (uint64_t(1) << 22)) {
    return 0;
  }
  std::vector<uint8_t> out(size_t(w) * h * 3);
  try {
    rfdetr::decode_rgb_into(rfdetr::encoded_format::jpeg, data, size, int(w), int(h), out.data());
  } catch (const rfdetr::decode_declined & e) {
    if (e.what()[0] == '\0') __builtin_trap();
  }
  return 0;
}
