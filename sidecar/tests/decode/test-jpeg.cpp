// JPEG: the forms libjpeg writes decode as libjpeg's defaults do; each decline reason names itself.
#include <gtest/gtest.h>

#include "decode-expect.h"
#include "jpeg-builder.h"

using namespace decode_test;
using rfdetr::encoded_format;

namespace {

void expect_like_libjpeg(const jpeg_spec & s) {
  const bytes f = make_jpeg(s);
  const bytes want = libjpeg_rgb(f);
  ASSERT_FALSE(want.empty());
  EXPECT_EQ(rfdetr::decode_rgb(encoded_format::jpeg, f.data(), f.size(), s.width, s.height), want)
      << s.width << "x" << s.height << " q" << s.quality << " " << s.h_samp << "x" << s.v_samp
      << (s.progressive ? " progressive" : "") << (s.arithmetic ? " arithmetic" : "");
}

// Junk between SOI and the next marker: libjpeg warns "extraneous bytes before marker" and reads on.
void insert_after_soi(bytes & f, const bytes & junk) { f.insert(f.begin() + 2, junk.begin(), junk.end()); }

}  // namespace

TEST(Jpeg, BaselineSubsamplingsAndOddSizes) {
  for (const auto & samp : {std::pair{1, 1}, std::pair{2, 2}, std::pair{2, 1}, std::pair{1, 2}, std::pair{4, 1}}) {
    for (const auto & wh : {std::pair{1, 1}, std::pair{3, 7}, std::pair{17, 9}, std::pair{64, 48}}) {
      jpeg_spec s;
      s.width = wh.first; s.height = wh.second; s.h_samp = samp.first; s.v_samp = samp.second;
      expect_like_libjpeg(s);
    }
  }
}

TEST(Jpeg, ProgressiveArithmeticRestartsRgbAndGrey) {
  jpeg_spec s;
  s.width = 33; s.height = 21;
  s.progressive = true; expect_like_libjpeg(s);
  s.progressive = false; s.arithmetic = true; expect_like_libjpeg(s);
  s.arithmetic = false; s.restart_rows = 1; expect_like_libjpeg(s);
  s.restart_rows = 0; s.rgb_colourspace = true; expect_like_libjpeg(s);
  s.rgb_colourspace = false; s.components = 1; expect_like_libjpeg(s);
  s.quality = 100; s.components = 3; expect_like_libjpeg(s);
}

TEST(Jpeg, GreyIsReplicated) {
  jpeg_spec s;
  s.components = 1; s.width = 9; s.height = 5;
  const bytes f = make_jpeg(s);
  const bytes got = rfdetr::decode_rgb(encoded_format::jpeg, f.data(), f.size(), 9, 5);
  for (size_t i = 0; i < got.size(); i += 3) {
    ASSERT_EQ(got[i], got[i + 1]);
    ASSERT_EQ(got[i], got[i + 2]);
  }
}

TEST(JpegDecline, Cmyk) {
  jpeg_spec s;
  s.components = 4;
  expect_declined(encoded_format::jpeg, make_jpeg(s), 16, 16, "CMYK JPEG");
}

TEST(JpegDecline, DeclaredSizeDiffers) {
  expect_declined(encoded_format::jpeg, make_jpeg(jpeg_spec{}), 16, 15, "the header says 16x16 but 16x15 was declared");
}

TEST(JpegDecline, TooManyScans) {
  jpeg_spec s;
  s.components = 1; s.scan_bomb = true;
  const bytes f = make_jpeg(s);
  ASSERT_FALSE(libjpeg_rgb(f).empty()) << "the 128-scan file must be a valid JPEG";
  expect_declined(encoded_format::jpeg, f, 16, 16, "more than 100 scans");
}

TEST(JpegDecline, WarningExtraneousBytes) {
  bytes f = make_jpeg(jpeg_spec{});
  insert_after_soi(f, {1, 2, 3});
  ASSERT_FALSE(libjpeg_rgb(f).empty()) << "libjpeg itself only warns";
  expect_declined(encoded_format::jpeg, f, 16, 16, "libjpeg warning (the server's decoder reads past it; this one does not): Corrupt JPEG data: 3 extraneous bytes");
}

TEST(JpegDecline, WarningPrematureEnd) {
  bytes f = make_jpeg(jpeg_spec{});
  f.resize(f.size() - 10);
  expect_declined(encoded_format::jpeg, f, 16, 16, "Premature end of JPEG file");
}

TEST(JpegDecline, NotAJpeg) {
  expect_declined(encoded_format::jpeg, make_png(png_spec{1, 1, 2, 8, {1, 2, 3}, {}, {}, {}, 6}), 1, 1, "libjpeg error: Not a JPEG file");
}

TEST(JpegDecline, TwelveBitPrecision) {
  bytes f = make_jpeg(jpeg_spec{});
  for (size_t i = 2; i + 4 < f.size(); ++i) {
    if (f[i] == 0xff && f[i + 1] == 0xc0) {  // SOF0: length(2), precision(1)
      f[i + 4] = 12;
      break;
    }
  }
  expect_declined(encoded_format::jpeg, f, 16, 16, "precision 12");
}

TEST(JpegDecline, NoImage) {
  const bytes f = {0xff, 0xd8, 0xff, 0xd9};
  expect_declined(encoded_format::jpeg, f, 16, 16, "contains no image");
}
