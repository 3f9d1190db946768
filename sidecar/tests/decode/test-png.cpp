// PNG forms the decoder accepts: every filter type at every pixel size, every accepted colour type and depth,
// palettes of 1/2/4/8 bits, split IDATs and ancillary chunks, each against a conversion written out here.
#include <gtest/gtest.h>

#include "decode/decode.h"
#include "decode/png-rows.h"
#include "png-builder.h"

using namespace decode_test;
using rfdetr::encoded_format;

namespace {

// The expected RGB from unfiltered rows, spelled out independently of png-rows.cpp.
bytes expected_rgb(const png_spec & s) {
  const size_t rb = png_rowbytes(s.width, s.colour, s.depth);
  bytes out;
  for (int y = 0; y < s.height; ++y) {
    const uint8_t * r = s.rows.data() + size_t(y) * rb;
    for (int x = 0; x < s.width; ++x) {
      const int n = png_channels(s.colour), bytes_per = s.depth / 8;
      if (s.colour == 3) {
        const int per = 8 / s.depth;
        const int v = s.depth == 8 ? r[x] : (r[x / per] >> (8 - s.depth * (x % per + 1))) & ((1 << s.depth) - 1);
        for (int c = 0; c < 3; ++c) out.push_back(s.palette[size_t(3 * v + c)]);
        continue;
      }
      const uint8_t * p = r + size_t(x) * n * bytes_per;  // high byte first in 16-bit
      if (s.colour == 0 || s.colour == 4) {
        for (int c = 0; c < 3; ++c) out.push_back(p[0]);
      } else {
        for (int c = 0; c < 3; ++c) out.push_back(p[c * bytes_per]);
      }
    }
  }
  return out;
}

png_spec random_spec(int w, int h, int colour, int depth, std::vector<int> filters, uint32_t seed) {
  png_spec s;
  s.width = w;
  s.height = h;
  s.colour = colour;
  s.depth = depth;
  s.filters = std::move(filters);
  s.rows = lcg_bytes(png_rowbytes(w, colour, depth) * size_t(h), seed);
  if (colour == 3) {
    s.palette = lcg_bytes(size_t(3) << depth, seed + 1);  // all 2^depth entries: every index is valid
  }
  return s;
}

void expect_decodes(const png_spec & s) {
  const bytes file = make_png(s);
  const auto got = rfdetr::decode_rgb(encoded_format::png, file.data(), file.size(), s.width, s.height);
  EXPECT_EQ(got, expected_rgb(s)) << s.width << "x" << s.height << " colour " << s.colour << " depth " << s.depth;
}

struct form {
  int colour, depth;
};
const form accepted_forms[] = {{2, 8}, {2, 16}, {6, 8}, {6, 16}, {4, 8}, {4, 16}, {0, 8},
                               {3, 1}, {3, 2},  {3, 4}, {3, 8}};

}  // namespace

TEST(Png, EveryFilterTypeAtEveryPixelSize) {
  for (const form f : accepted_forms) {
    for (int filter = 0; filter <= 4; ++filter) {
      expect_decodes(random_spec(13, 6, f.colour, f.depth, {filter}, uint32_t(100 + filter)));
    }
    expect_decodes(random_spec(17, 10, f.colour, f.depth, {4, 0, 3, 1, 2, 4, 4, 3}, 7));  // mixed per row
  }
}

TEST(Png, EveryAcceptedColourTypeAndDepthAtOddSizes) {
  for (const form f : accepted_forms) {
    for (const auto & wh : {std::pair{1, 1}, std::pair{3, 7}, std::pair{9, 2}, std::pair{64, 3}}) {
      expect_decodes(random_spec(wh.first, wh.second, f.colour, f.depth, {0, 1, 2, 3, 4}, uint32_t(wh.first * 31 + f.depth)));
    }
  }
}

TEST(Png, SixteenBitKeepsTheHighByte) {
  png_spec s = random_spec(2, 1, 2, 16, {0}, 1);
  s.rows = {0x12, 0xff, 0x34, 0x00, 0x56, 0x01, 0xab, 0xcd, 0x00, 0xff, 0xff, 0x00};
  const bytes file = make_png(s);
  EXPECT_EQ(rfdetr::decode_rgb(encoded_format::png, file.data(), file.size(), 2, 1),
            (bytes{0x12, 0x34, 0x56, 0xab, 0x00, 0xff}));
}

TEST(Png, AlphaIsDroppedNotComposited) {
  png_spec s = random_spec(2, 1, 6, 8, {0}, 1);
  s.rows = {10, 20, 30, 0, 40, 50, 60, 128};
  const bytes file = make_png(s);
  EXPECT_EQ(rfdetr::decode_rgb(encoded_format::png, file.data(), file.size(), 2, 1), (bytes{10, 20, 30, 40, 50, 60}));
}

TEST(Png, PaletteTrnsIsIgnoredAndShortPaletteAccepted) {
  png_spec s = random_spec(5, 2, 3, 4, {1}, 3);
  s.palette = lcg_bytes(3 * 5, 9);       // 5 entries
  for (auto & v : s.rows) v = uint8_t(((v >> 4) % 5) << 4 | (v & 0xf) % 5);
  s.trns = {0, 255, 7};
  expect_decodes(s);
}

TEST(Png, RgbAndGreyTrnsAreIgnored) {
  png_spec rgb = random_spec(4, 3, 2, 8, {2}, 5);
  rgb.trns = {0, 1, 0, 2, 0, 3};
  expect_decodes(rgb);
  png_spec grey = random_spec(4, 3, 0, 8, {3}, 6);
  grey.trns = {0, 9};
  expect_decodes(grey);
}

TEST(Png, SplitIdatsAndAncillaryChunksAreRead) {
  const png_spec s = random_spec(31, 9, 2, 8, {4, 1}, 11);
  const bytes z = zlib_compress(png_filter_rows(s));
  bytes file = png_signature();
  auto add = [&file](const bytes & c) { file.insert(file.end(), c.begin(), c.end()); };
  add(png_ihdr(31, 9, 8, 2));
  add(png_chunk("gAMA", {0, 0, 0xb1, 0x8f}));
  add(png_chunk("sRGB", {0}));
  add(png_chunk("tEXt", {'k', 0, 'v'}));
  for (size_t i = 0; i < z.size(); i += 7) add(png_chunk("IDAT", bytes(z.begin() + long(i), z.begin() + long(std::min(z.size(), i + 7)))));
  add(png_chunk("IDAT", {}));
  add(png_chunk("tIME", {7, 0xe6, 1, 1, 0, 0, 0}));
  add(png_chunk("IEND", {}));
  EXPECT_EQ(rfdetr::decode_rgb(encoded_format::png, file.data(), file.size(), 31, 9), expected_rgb(s));
}

TEST(Png, EveryCompressionLevel) {
  for (int level : {0, 1, 6, 12}) {
    png_spec s = random_spec(40, 12, 6, 8, {0, 1, 2, 3, 4}, uint32_t(level));
    for (size_t i = 0; i < s.rows.size(); i += 3) s.rows[i] = 7;  // something to compress
    s.level = level;
    expect_decodes(s);
  }
}

TEST(Png, SsePaethAgreesWithScalar) {
  if (!rfdetr::decode_detail::png_has_sse41()) GTEST_SKIP() << "no SSE4.1 on this CPU: only the scalar Paeth runs";
  for (size_t bpp : {3u, 4u}) {
    for (size_t pixels : {1u, 2u, 3u, 33u, 1920u}) {
      const size_t n = pixels * bpp;
      const bytes prev = lcg_bytes(n, uint32_t(n + bpp));
      bytes a = lcg_bytes(n, uint32_t(n * 7 + bpp)), b = a;
      rfdetr::decode_detail::png_unpaeth_scalar(a.data(), prev.data(), n, bpp);
      rfdetr::decode_detail::png_unpaeth_sse41(b.data(), prev.data(), n, bpp);
      EXPECT_EQ(a, b) << "bpp " << bpp << ", " << n << " bytes";
    }
  }
}

TEST(Png, PaethTiesPickInTheSpecsOrder) {
  // Samples 0..3: the predictor's ties (pa == pb, pb == pc) are frequent, and the spec's order a, b, c decides.
  for (const form f : accepted_forms) {
    png_spec s = random_spec(23, 9, f.colour, f.depth, {4}, 77);
    for (auto & v : s.rows) v &= f.colour == 3 ? 0xff : 0x03;
    expect_decodes(s);
  }
}
