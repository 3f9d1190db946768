// The encoder side of PNG (chunks, filters, zlib) for the decode tests.
#include "png-builder.h"

// GCC 12 reports false stringop-overflow/overread on vector inserts of possibly-empty ranges at -O3.
#pragma GCC diagnostic ignored "-Wstringop-overflow"
#pragma GCC diagnostic ignored "-Wstringop-overread"

#include <cstdlib>
#include <stdexcept>

#include <libdeflate.h>

namespace decode_test {

static void put32(bytes & b, uint32_t v) {
  for (int s = 24; s >= 0; s -= 8) b.push_back(uint8_t(v >> s));
}

bytes png_signature() { return {0x89, 'P', 'N', 'G', 0x0d, 0x0a, 0x1a, 0x0a}; }

bytes png_chunk(const std::string & type, const bytes & data, uint32_t crc_delta) {
  bytes b;
  put32(b, uint32_t(data.size()));
  b.insert(b.end(), type.begin(), type.end());
  b.insert(b.end(), data.begin(), data.end());
  const uint32_t crc = uint32_t(libdeflate_crc32(0, b.data() + 4, data.size() + 4));
  put32(b, crc + crc_delta);
  return b;
}

bytes png_ihdr(uint32_t w, uint32_t h, int depth, int colour, int interlace) {
  bytes d;
  put32(d, w);
  put32(d, h);
  d.push_back(uint8_t(depth));
  d.push_back(uint8_t(colour));
  d.push_back(0);
  d.push_back(0);
  d.push_back(uint8_t(interlace));
  return png_chunk("IHDR", d);
}

bytes zlib_compress(const bytes & raw, int level) {
  libdeflate_compressor * c = libdeflate_alloc_compressor(level);
  if (!c) throw std::runtime_error("libdeflate_alloc_compressor failed");
  bytes out(libdeflate_zlib_compress_bound(c, raw.size()));
  const size_t n = libdeflate_zlib_compress(c, raw.data(), raw.size(), out.data(), out.size());
  libdeflate_free_compressor(c);
  if (n == 0) throw std::runtime_error("libdeflate_zlib_compress failed");
  out.resize(n);
  return out;
}

int png_channels(int colour) { return colour == 2 ? 3 : colour == 4 ? 2 : colour == 6 ? 4 : 1; }

size_t png_rowbytes(int w, int colour, int depth) { return (size_t(w) * png_channels(colour) * depth + 7) / 8; }

static uint8_t paeth(int a, int b, int c) {
  const int p = a + b - c, pa = std::abs(p - a), pb = std::abs(p - b), pc = std::abs(p - c);
  return uint8_t(pa <= pb && pa <= pc ? a : pb <= pc ? b : c);
}

bytes png_filter_rows(const png_spec & s) {
  const size_t rb = png_rowbytes(s.width, s.colour, s.depth);
  const size_t bpp = std::max<size_t>(1, size_t(png_channels(s.colour) * s.depth / 8));
  if (s.rows.size() != rb * size_t(s.height)) throw std::runtime_error("png_spec: rows has the wrong size");
  bytes out;
  for (int y = 0; y < s.height; ++y) {
    const int f = s.filters.empty() ? 0 : s.filters[size_t(y) % s.filters.size()];
    out.push_back(uint8_t(f));
    const uint8_t * cur = s.rows.data() + size_t(y) * rb;
    const uint8_t * up = y > 0 ? cur - rb : nullptr;
    for (size_t i = 0; i < rb; ++i) {
      const int a = i >= bpp ? cur[i - bpp] : 0, b = up ? up[i] : 0, c = (up && i >= bpp) ? up[i - bpp] : 0;
      int pred = 0;
      if (f == 1) pred = a;
      if (f == 2) pred = b;
      if (f == 3) pred = (a + b) >> 1;
      if (f == 4) pred = paeth(a, b, c);
      out.push_back(uint8_t(cur[i] - pred));
    }
  }
  return out;
}

bytes make_png(const png_spec & s) {
  bytes b = png_signature();
  const bytes ihdr = png_ihdr(uint32_t(s.width), uint32_t(s.height), s.depth, s.colour);
  b.insert(b.end(), ihdr.begin(), ihdr.end());
  if (!s.palette.empty()) {
    const bytes c = png_chunk("PLTE", s.palette);
    b.insert(b.end(), c.begin(), c.end());
  }
  if (!s.trns.empty()) {
    const bytes c = png_chunk("tRNS", s.trns);
    b.insert(b.end(), c.begin(), c.end());
  }
  const bytes idat = png_chunk("IDAT", zlib_compress(png_filter_rows(s), s.level));
  b.insert(b.end(), idat.begin(), idat.end());
  const bytes iend = png_chunk("IEND", {});
  b.insert(b.end(), iend.begin(), iend.end());
  return b;
}

bytes lcg_bytes(size_t n, uint32_t seed) {
  bytes out(n);
  uint32_t s = seed;
  for (auto & v : out) {
    s = s * 1664525u + 1013904223u;
    v = uint8_t(s >> 24);
  }
  return out;
}

}  // namespace decode_test
