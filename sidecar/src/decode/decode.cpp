// decode_rgb_into's argument checks and the dispatch to the JPEG and PNG decoders.
#include "decode/decode.h"

#include <string>

#include "decode/decode-internal.h"

namespace rfdetr {

namespace decode_detail {
void decline(const std::string & why) { throw decode_declined(why); }
}  // namespace decode_detail

const char * encoded_format_name(encoded_format f) { return f == encoded_format::jpeg ? "jpeg" : "png"; }

void decode_rgb_into(encoded_format f, const uint8_t * data, size_t size, int width, int height, uint8_t * out) {
  const std::string what = encoded_format_name(f);
  if (width < 1 || height < 1 || width > decode_max_side || height > decode_max_side) {
    decode_detail::decline(what + ": the declared size " + std::to_string(width) + "x" + std::to_string(height) +
                           " is outside 1.." + std::to_string(decode_max_side) + " per side");
  }
  if (data == nullptr || size == 0) decode_detail::decline(what + ": the input is empty (0 bytes)");
  if (out == nullptr) throw std::invalid_argument("decode_rgb_into: out is null; pass a buffer of width*height*3 bytes");
  if (f == encoded_format::png) {
    decode_detail::decode_png(data, size, width, height, out);
  } else {
    decode_detail::decode_jpeg(data, size, width, height, out);
  }
}

std::vector<uint8_t> decode_rgb(encoded_format f, const uint8_t * data, size_t size, int width, int height) {
  if (width < 1 || height < 1 || width > decode_max_side || height > decode_max_side) {
    decode_rgb_into(f, data, size, width, height, nullptr);  // declines with the size message
  }
  std::vector<uint8_t> out(size_t(width) * size_t(height) * 3);
  decode_rgb_into(f, data, size, width, height, out.data());
  return out;
}

}  // namespace rfdetr
