// Truncation at every byte offset declines (never crashes, never accepts); a deterministic byte-flip loop
// never crashes and, when it accepts, produces the original image's size.
#include <gtest/gtest.h>

#include "decode/decode.h"
#include "jpeg-builder.h"
#include "png-builder.h"

using namespace decode_test;
using rfdetr::encoded_format;

namespace {

bytes small_png() {
  png_spec s;
  s.width = 7; s.height = 5; s.colour = 3; s.depth = 4;
  s.palette = lcg_bytes(3 * 16, 3);
  s.rows = lcg_bytes(png_rowbytes(7, 3, 4) * 5, 4);
  s.filters = {0, 1, 2, 3, 4};
  bytes f = make_png(s);
  return f;
}

bytes small_rgba_png() {
  png_spec s;
  s.width = 6; s.height = 4; s.colour = 6; s.depth = 16;
  s.rows = lcg_bytes(png_rowbytes(6, 6, 16) * 4, 5);
  s.filters = {4, 3, 2, 1};
  return make_png(s);
}

bytes small_jpeg(bool progressive) {
  jpeg_spec s;
  s.width = 19; s.height = 11; s.progressive = progressive;
  return make_jpeg(s);
}

// 0: declined, 1: accepted.
int outcome(encoded_format f, const bytes & b, int w, int h) {
  try {
    const auto rgb = rfdetr::decode_rgb(f, b.data(), b.size(), w, h);
    EXPECT_EQ(rgb.size(), size_t(w) * h * 3);
    return 1;
  } catch (const rfdetr::decode_declined &) {
    return 0;
  }
}

void every_truncation_declines(encoded_format f, const bytes & file, int w, int h) {
  ASSERT_EQ(outcome(f, file, w, h), 1) << "the whole file must decode";
  for (size_t n = 0; n < file.size(); ++n) {
    const bytes cut(file.begin(), file.begin() + long(n));
    EXPECT_EQ(outcome(f, cut, w, h), 0) << "accepted the first " << n << " of " << file.size() << " bytes";
  }
}

void flips_never_crash(encoded_format f, const bytes & file, int w, int h, int rounds) {
  uint32_t s = 12345;
  auto next = [&s]() { return s = s * 1664525u + 1013904223u; };
  int accepted = 0;
  for (int i = 0; i < rounds; ++i) {
    bytes m = file;
    const int flips = 1 + int(next() >> 30);
    for (int k = 0; k < flips; ++k) m[(next() >> 8) % m.size()] ^= uint8_t(1u << ((next() >> 24) & 7));
    accepted += outcome(f, m, w, h);
  }
  // Most flips hit a CRC (PNG) or a warning/corrupt stream (JPEG); some land in pixels and are read.
  ::testing::Test::RecordProperty("accepted", accepted);
}

}  // namespace

TEST(Robustness, PngTruncatedAtEveryOffsetDeclines) {
  every_truncation_declines(encoded_format::png, small_png(), 7, 5);
  every_truncation_declines(encoded_format::png, small_rgba_png(), 6, 4);
}

TEST(Robustness, JpegTruncatedAtEveryOffsetDeclines) {
  every_truncation_declines(encoded_format::jpeg, small_jpeg(false), 19, 11);
  every_truncation_declines(encoded_format::jpeg, small_jpeg(true), 19, 11);
}

TEST(Robustness, PngByteFlipsNeverCrash) {
  flips_never_crash(encoded_format::png, small_png(), 7, 5, 3000);
  flips_never_crash(encoded_format::png, small_rgba_png(), 6, 4, 2000);
}

TEST(Robustness, JpegByteFlipsNeverCrash) {
  flips_never_crash(encoded_format::jpeg, small_jpeg(false), 19, 11, 3000);
  flips_never_crash(encoded_format::jpeg, small_jpeg(true), 19, 11, 2000);
}
