// The per-format decoders behind decode_rgb_into (decode.cpp checks the arguments they share).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace rfdetr::decode_detail {

[[noreturn]] void decline(const std::string & why);

// Both: width/height are the declared size (1..decode_max_side), out has width*height*3 bytes.
void decode_png(const uint8_t * data, size_t size, int width, int height, uint8_t * out);
void decode_jpeg(const uint8_t * data, size_t size, int width, int height, uint8_t * out);

}  // namespace rfdetr::decode_detail
