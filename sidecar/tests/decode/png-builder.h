// Hand-built PNG files for the decode tests: exact control over every chunk, filter byte and zlib stream,
// independent of the decoder under test (zlib stream from libdeflate's compressor, CRCs from libdeflate_crc32).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace decode_test {

using bytes = std::vector<uint8_t>;

// One chunk: length, type, data, CRC (crc_delta is added to the right CRC, to make a wrong one).
bytes png_chunk(const std::string & type, const bytes & data, uint32_t crc_delta = 0);
bytes png_ihdr(uint32_t w, uint32_t h, int depth, int colour, int interlace = 0);
bytes zlib_compress(const bytes & raw, int level = 6);
int png_channels(int colour);
size_t png_rowbytes(int w, int colour, int depth);

struct png_spec {
  int width = 1, height = 1, colour = 2, depth = 8;
  bytes rows;                 // unfiltered packed rows, height * rowbytes
  std::vector<int> filters;   // per row (0..4; cycled when shorter), applied by the builder
  bytes palette, trns;
  int level = 6;
};

// Applies spec.filters to spec.rows (the encoder side of PNG filtering), returns the filtered stream.
bytes png_filter_rows(const png_spec & s);
// Signature, IHDR, [PLTE], [tRNS], one IDAT, IEND.
bytes make_png(const png_spec & s);
bytes png_signature();

// Deterministic bytes (an LCG), so failures reproduce.
bytes lcg_bytes(size_t n, uint32_t seed);

}  // namespace decode_test
