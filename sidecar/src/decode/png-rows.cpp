// PNG row filters (None/Sub/Up/Average/Paeth, PNG spec 9.2) undone in place, and the row-to-RGB conversion:
// 16-bit samples keep the high byte, alpha is dropped, grey replicated, palette looked up.
#include "decode/png-rows.h"

#include <cstdlib>
#include <cstring>

#include <immintrin.h>

namespace rfdetr::decode_detail {
namespace {

inline uint8_t paeth(int a, int b, int c) {
  const int p = a + b - c;
  const int pa = std::abs(p - a), pb = std::abs(p - b), pc = std::abs(p - c);
  if (pa <= pb && pa <= pc) return uint8_t(a);
  if (pb <= pc) return uint8_t(b);
  return uint8_t(c);
}

}  // namespace

void png_unpaeth_scalar(uint8_t * row, const uint8_t * prev, size_t rowbytes, size_t bpp) {
  if (!prev) {  // b = c = 0: Paeth picks a, i.e. Sub
    for (size_t i = bpp; i < rowbytes; ++i) row[i] = uint8_t(row[i] + row[i - bpp]);
    return;
  }
  for (size_t i = 0; i < bpp && i < rowbytes; ++i) row[i] = uint8_t(row[i] + prev[i]);  // a = c = 0: picks b
  for (size_t i = bpp; i < rowbytes; ++i) row[i] = uint8_t(row[i] + paeth(row[i - bpp], prev[i], prev[i - bpp]));
}

bool png_has_sse41() {
  static const bool has = __builtin_cpu_supports("sse4.1");
  return has;
}

// One pixel at a time (the dependency on the left pixel is serial), all channels of it at once in 16-bit lanes.
// BPP is a template constant so that the pixel's loads and stores are fixed-size moves: with a run-time size
// each memcpy was a call into libc (three per pixel; the Paeth rows took 20 % of a 640x480 PNG's decode).
namespace {

// A pixel's 3 or 4 bytes into the low 16-bit lanes. Three bytes are put together in a register: a 3-byte memcpy
// into a stack word read back whole failed store-to-load forwarding (two stalls a pixel).
template <size_t BPP> __attribute__((target("sse4.1"))) inline __m128i paeth_load(const uint8_t * p) {
  uint32_t v;
  if constexpr (BPP == 4) {
    std::memcpy(&v, p, 4);
  } else {
    v = uint32_t(p[0]) | uint32_t(p[1]) << 8 | uint32_t(p[2]) << 16;
  }
  return _mm_cvtepu8_epi16(_mm_cvtsi32_si128(int(v)));
}

template <size_t BPP> __attribute__((target("sse4.1"))) void unpaeth_sse41(uint8_t * row, const uint8_t * prev,
                                                                           size_t rowbytes) {
  const __m128i zero = _mm_setzero_si128();
  __m128i a = zero, c = zero;
  for (size_t i = 0; i + BPP <= rowbytes; i += BPP) {
    const __m128i b = paeth_load<BPP>(prev + i);
    const __m128i x = paeth_load<BPP>(row + i);
    // p - a = b - c, p - b = a - c, p - c = a + b - 2c
    const __m128i pa = _mm_abs_epi16(_mm_sub_epi16(b, c));
    const __m128i pb = _mm_abs_epi16(_mm_sub_epi16(a, c));
    const __m128i pc = _mm_abs_epi16(_mm_sub_epi16(_mm_add_epi16(a, b), _mm_add_epi16(c, c)));
    // pick a if pa <= pb && pa <= pc; else b if pb <= pc; else c
    const __m128i not_a = _mm_or_si128(_mm_cmpgt_epi16(pa, pb), _mm_cmpgt_epi16(pa, pc));
    const __m128i not_b = _mm_cmpgt_epi16(pb, pc);
    const __m128i bc = _mm_blendv_epi8(b, c, not_b);
    const __m128i pred = _mm_blendv_epi8(a, bc, not_a);
    const __m128i v = _mm_and_si128(_mm_add_epi16(x, pred), _mm_set1_epi16(0xff));
    const uint32_t packed = uint32_t(_mm_cvtsi128_si32(_mm_packus_epi16(v, zero)));
    std::memcpy(row + i, &packed, BPP);
    a = v;
    c = b;
  }
}

}  // namespace

__attribute__((target("sse4.1"))) void png_unpaeth_sse41(uint8_t * row, const uint8_t * prev, size_t rowbytes,
                                                          size_t bpp) {
  if (!prev || (bpp != 3 && bpp != 4) || rowbytes < bpp) {
    png_unpaeth_scalar(row, prev, rowbytes, bpp);
    return;
  }
  if (bpp == 3) {
    unpaeth_sse41<3>(row, prev, rowbytes);
  } else {
    unpaeth_sse41<4>(row, prev, rowbytes);
  }
}

bool png_unfilter_row(uint8_t filter, uint8_t * row, const uint8_t * prev, size_t rowbytes, size_t bpp) {
  switch (filter) {
    case 0:
      return true;
    case 1:
      for (size_t i = bpp; i < rowbytes; ++i) row[i] = uint8_t(row[i] + row[i - bpp]);
      return true;
    case 2:
      if (prev)
        for (size_t i = 0; i < rowbytes; ++i) row[i] = uint8_t(row[i] + prev[i]);
      return true;
    case 3:
      if (prev) {
        for (size_t i = 0; i < bpp && i < rowbytes; ++i) row[i] = uint8_t(row[i] + (prev[i] >> 1));
        for (size_t i = bpp; i < rowbytes; ++i) row[i] = uint8_t(row[i] + ((row[i - bpp] + prev[i]) >> 1));
      } else {
        for (size_t i = bpp; i < rowbytes; ++i) row[i] = uint8_t(row[i] + (row[i - bpp] >> 1));
      }
      return true;
    case 4:
      if (prev && (bpp == 3 || bpp == 4) && png_has_sse41()) {
        png_unpaeth_sse41(row, prev, rowbytes, bpp);
      } else {
        png_unpaeth_scalar(row, prev, rowbytes, bpp);
      }
      return true;
    default:
      return false;
  }
}

long png_row_to_rgb(const png_pixels & px, const uint8_t * row, int width, uint8_t * out) {
  const size_t w = size_t(width);
  switch (px.colour) {
    case 2:
      if (px.depth == 8) {
        std::memcpy(out, row, w * 3);
      } else {
        for (size_t i = 0; i < w * 3; ++i) out[i] = row[2 * i];
      }
      return -1;
    case 6: {
      const size_t step = px.depth == 8 ? 4 : 8, s = px.depth == 8 ? 1 : 2;
      for (size_t x = 0; x < w; ++x) {
        out[3 * x] = row[x * step];
        out[3 * x + 1] = row[x * step + s];
        out[3 * x + 2] = row[x * step + 2 * s];
      }
      return -1;
    }
    case 4:
    case 0: {
      const size_t step = (px.colour == 4 ? 2 : 1) * size_t(px.depth / 8);
      for (size_t x = 0; x < w; ++x) out[3 * x] = out[3 * x + 1] = out[3 * x + 2] = row[x * step];
      return -1;
    }
    case 3: {
      const int d = px.depth;
      const unsigned mask = (1u << d) - 1;
      for (size_t x = 0; x < w; ++x) {
        unsigned idx;
        if (d == 8) {
          idx = row[x];
        } else {
          const size_t bit = x * size_t(d);
          idx = (unsigned(row[bit >> 3]) >> (8 - d - (bit & 7))) & mask;
        }
        if (idx >= unsigned(px.palette_size)) return long(x);
        std::memcpy(out + 3 * x, px.palette + 3 * idx, 3);
      }
      return -1;
    }
    default:
      return 0;  // unreachable: png.cpp admits only the colour types above
  }
}

}  // namespace rfdetr::decode_detail
