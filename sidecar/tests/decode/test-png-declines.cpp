// One test per reason the PNG decoder declines, each asserting the message names it.
#include <gtest/gtest.h>

#include "decode-expect.h"
#include "png-builder.h"

using namespace decode_test;

namespace {

png_spec rgb_spec(int w = 4, int h = 3) {
  png_spec s;
  s.width = w;
  s.height = h;
  s.rows = lcg_bytes(png_rowbytes(w, 2, 8) * size_t(h), 1);
  s.filters = {1};
  return s;
}

void append(bytes & b, const bytes & c) { b.insert(b.end(), c.begin(), c.end()); }

// Signature + the given chunks (already built).
bytes file_of(std::initializer_list<bytes> chunks) {
  bytes b = png_signature();
  for (const auto & c : chunks) append(b, c);
  return b;
}

bytes idat_of(const png_spec & s) { return png_chunk("IDAT", zlib_compress(png_filter_rows(s))); }
const bytes iend = png_chunk("IEND", {});

}  // namespace

TEST(PngDecline, NoSignature) {
  bytes f = make_png(rgb_spec());
  f[1] = 'Q';
  expect_png_declined(f, 4, 3, "no PNG signature");
}

TEST(PngDecline, FirstChunkNotIhdr) {
  const png_spec s = rgb_spec();
  expect_png_declined(file_of({png_chunk("gAMA", {0, 0, 0, 1}), png_ihdr(4, 3, 8, 2), idat_of(s), iend}), 4, 3, "not IHDR of 13");
}

TEST(PngDecline, IhdrNotThirteenBytes) {
  bytes d(14, 0);
  d[3] = 4; d[7] = 3; d[8] = 8; d[9] = 2;
  expect_png_declined(file_of({png_chunk("IHDR", d), idat_of(rgb_spec()), iend}), 4, 3, "not IHDR of 13");
}

TEST(PngDecline, CrcMismatch) {
  const png_spec s = rgb_spec();
  expect_png_declined(file_of({png_ihdr(4, 3, 8, 2), png_chunk("tEXt", {'a', 0, 'b'}, 1), idat_of(s), iend}), 4, 3, "CRC mismatch in chunk 'tEXt'");
}

TEST(PngDecline, Interlaced) {
  expect_png_declined(file_of({png_ihdr(4, 3, 8, 2, 1), idat_of(rgb_spec()), iend}), 4, 3, "Adam7-interlaced");
}

TEST(PngDecline, SixteenBitGrey) {
  png_spec s = rgb_spec();
  s.colour = 0; s.depth = 16; s.rows = lcg_bytes(png_rowbytes(4, 0, 16) * 3, 2);
  expect_png_declined(make_png(s), 4, 3, "16-bit greyscale");
}

TEST(PngDecline, LowBitGrey) {
  for (int depth : {1, 2, 4}) {
    png_spec s = rgb_spec();
    s.colour = 0; s.depth = depth; s.rows = lcg_bytes(png_rowbytes(4, 0, depth) * 3, 2);
    expect_png_declined(make_png(s), 4, 3, std::to_string(depth) + "-bit greyscale");
  }
}

TEST(PngDecline, SideOver8192) {
  expect_png_declined(file_of({png_ihdr(8193, 1, 8, 2), idat_of(rgb_spec()), iend}), 8192, 1, "a side over 8192");
}

TEST(PngDecline, DeclaredSizeDiffers) {
  expect_png_declined(make_png(rgb_spec(4, 3)), 3, 4, "IHDR says 4x3 but 3x4 was declared");
}

TEST(PngDecline, DepthNotAllowedForColourType) {
  expect_png_declined(file_of({png_ihdr(4, 3, 4, 2), idat_of(rgb_spec()), iend}), 4, 3, "which the PNG spec does not allow");
}

TEST(PngDecline, NonzeroCompressionMethod) {
  bytes d = {0, 0, 0, 4, 0, 0, 0, 3, 8, 2, 1, 0, 0};
  expect_png_declined(file_of({png_chunk("IHDR", d), idat_of(rgb_spec()), iend}), 4, 3, "compression method 1");
}

TEST(PngDecline, UnknownCriticalChunk) {
  expect_png_declined(file_of({png_ihdr(4, 3, 8, 2), png_chunk("ZZZZ", {1}), idat_of(rgb_spec()), iend}), 4, 3, "unknown critical chunk 'ZZZZ'");
}

TEST(PngDecline, ReservedBitSet) {
  expect_png_declined(file_of({png_ihdr(4, 3, 8, 2), png_chunk("tEsT", {1}), idat_of(rgb_spec()), iend}), 4, 3, "reserved bit");
}

TEST(PngDecline, ChunkTypeNotLetters) {
  expect_png_declined(file_of({png_ihdr(4, 3, 8, 2), png_chunk("t1ST", {1}), idat_of(rgb_spec()), iend}), 4, 3, "not 4 letters");
}

TEST(PngDecline, TooManyAncillaryChunks) {
  bytes f = file_of({png_ihdr(4, 3, 8, 2)});
  for (int i = 0; i < 101; ++i) append(f, png_chunk("tEXt", {'k', 0, uint8_t('0' + i % 10)}));
  append(f, idat_of(rgb_spec()));
  append(f, iend);
  expect_png_declined(f, 4, 3, "more than 100 ancillary chunks");
  // 100 are read
  bytes ok = file_of({png_ihdr(4, 3, 8, 2)});
  for (int i = 0; i < 100; ++i) append(ok, png_chunk("tEXt", {'k', 0, 'v'}));
  append(ok, idat_of(rgb_spec()));
  append(ok, iend);
  EXPECT_NO_THROW(rfdetr::decode_rgb(rfdetr::encoded_format::png, ok.data(), ok.size(), 4, 3));
}

TEST(PngDecline, IdatsNotContiguous) {
  const bytes z = zlib_compress(png_filter_rows(rgb_spec()));
  const bytes a(z.begin(), z.begin() + 5), b(z.begin() + 5, z.end());
  expect_png_declined(file_of({png_ihdr(4, 3, 8, 2), png_chunk("IDAT", a), png_chunk("tEXt", {'k', 0}), png_chunk("IDAT", b), iend}),
                      4, 3, "not contiguous");
}

TEST(PngDecline, BytesAfterIend) {
  bytes f = make_png(rgb_spec());
  f.push_back(0);
  expect_png_declined(f, 4, 3, "1 bytes after IEND");
}

TEST(PngDecline, NoIend) {
  expect_png_declined(file_of({png_ihdr(4, 3, 8, 2), idat_of(rgb_spec())}), 4, 3, "no IEND");
}

TEST(PngDecline, NoIdat) {
  expect_png_declined(file_of({png_ihdr(4, 3, 8, 2), iend}), 4, 3, "no IDAT");
}

TEST(PngDecline, ChunkRunsPastTheEnd) {
  bytes f = make_png(rgb_spec());
  f.resize(f.size() - 20);  // inside IDAT
  expect_png_declined(f, 4, 3, "runs past the end");
}

TEST(PngDecline, ZlibStreamShort) {
  png_spec s = rgb_spec();
  bytes raw = png_filter_rows(s);
  raw.pop_back();
  expect_png_declined(file_of({png_ihdr(4, 3, 8, 2), png_chunk("IDAT", zlib_compress(raw)), iend}), 4, 3, "ends before the image's last row");
}

TEST(PngDecline, ZlibStreamLong) {
  bytes raw = png_filter_rows(rgb_spec());
  raw.push_back(0);
  expect_png_declined(file_of({png_ihdr(4, 3, 8, 2), png_chunk("IDAT", zlib_compress(raw)), iend}), 4, 3, "more data than the image's rows");
}

TEST(PngDecline, ZlibStreamCorrupt) {
  bytes z = zlib_compress(png_filter_rows(rgb_spec()));
  z[0] = 0x79;  // CMF with CINFO 7 but FCHECK now wrong
  expect_png_declined(file_of({png_ihdr(4, 3, 8, 2), png_chunk("IDAT", z), iend}), 4, 3, "zlib stream is corrupt");
}

TEST(PngDecline, DataAfterZlibStream) {
  bytes z = zlib_compress(png_filter_rows(rgb_spec()));
  z.push_back(0);
  expect_png_declined(file_of({png_ihdr(4, 3, 8, 2), png_chunk("IDAT", z), iend}), 4, 3, "after the end of the zlib stream");
}

TEST(PngDecline, BadFilterByte) {
  png_spec s = rgb_spec();
  s.filters = {0, 5};
  expect_png_declined(make_png(s), 4, 3, "row 1 has filter type 5");
}

TEST(PngDecline, PaletteIndexBeyondPlte) {
  png_spec s = rgb_spec(4, 2);
  s.colour = 3; s.depth = 8; s.rows = {0, 1, 0, 1, 1, 0, 2, 0};
  s.palette = {1, 2, 3, 4, 5, 6};
  expect_png_declined(make_png(s), 4, 2, "palette index beyond the PLTE's 2 entries at row 1, column 2");
}

TEST(PngDecline, PaletteWithoutPlte) {
  png_spec s = rgb_spec(4, 2);
  s.colour = 3; s.depth = 8; s.rows = bytes(8, 0);
  expect_png_declined(make_png(s), 4, 2, "without PLTE");
}

TEST(PngDecline, PlteInGrey) {
  png_spec s = rgb_spec(4, 2);
  s.colour = 0; s.rows = bytes(8, 0); s.palette = {1, 2, 3};
  expect_png_declined(make_png(s), 4, 2, "PLTE in a greyscale image");
}

TEST(PngDecline, PlteTooLongForDepth) {
  png_spec s = rgb_spec(4, 2);
  s.colour = 3; s.depth = 1; s.rows = bytes(2, 0); s.palette = bytes(9, 0);
  expect_png_declined(make_png(s), 4, 2, "PLTE of 9 bytes");
}

TEST(PngDecline, TrnsWrongLength) {
  png_spec s = rgb_spec();
  s.trns = {0, 1};
  expect_png_declined(make_png(s), 4, 3, "tRNS chunk of 2 bytes does not fit colour type 2");
}

TEST(PngDecline, SecondIhdr) {
  expect_png_declined(file_of({png_ihdr(4, 3, 8, 2), png_ihdr(4, 3, 8, 2), idat_of(rgb_spec()), iend}), 4, 3, "a second IHDR");
}

TEST(PngDecline, DeclaredSizeOutOfRange) {
  expect_png_declined(make_png(rgb_spec()), 0, 3, "declared size 0x3");
}

TEST(PngDecline, Empty) {
  expect_png_declined({}, 4, 3, "empty");
}

TEST(PngDecline, Animated) {
  expect_png_declined(file_of({png_ihdr(4, 3, 8, 2), png_chunk("acTL", {0, 0, 0, 2, 0, 0, 0, 0}), idat_of(rgb_spec()), iend}), 4, 3,
                      "an animated PNG (acTL)");
}
