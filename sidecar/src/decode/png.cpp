// PNG without libpng: the chunk walk (signature, IHDR first, every CRC, PLTE, contiguous IDATs, IEND last),
// the concatenated IDATs inflated by libdeflate into a buffer of exactly height*(1+rowbytes) bytes, then each
// row unfiltered and converted (png-rows.cpp). Only what libvips' pngload (libpng 1.6) reads to the same pixels
// is accepted; the rest is declined with the reason.
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include <libdeflate.h>

#include "decode/decode-internal.h"
#include "decode/decode.h"
#include "decode/png-rows.h"

namespace rfdetr::decode_detail {
namespace {

uint32_t be32(const uint8_t * p) {
  return (uint32_t(p[0]) << 24) | (uint32_t(p[1]) << 16) | (uint32_t(p[2]) << 8) | uint32_t(p[3]);
}

bool is_letter(uint8_t c) { return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z'); }

std::string at(size_t pos) { return " at byte " + std::to_string(pos); }

[[noreturn]] void png_decline(const std::string & why) { decline("png: " + why); }

struct ihdr_fields {
  uint32_t width, height;
  int depth, colour, compression, filter, interlace;
};

int channels_of(int colour) {
  switch (colour) {
    case 0: return 1;
    case 2: return 3;
    case 3: return 1;
    case 4: return 2;
    case 6: return 4;
    default: return 0;
  }
}

bool valid_depth(int colour, int depth) {
  switch (colour) {
    case 0: return depth == 1 || depth == 2 || depth == 4 || depth == 8 || depth == 16;
    case 3: return depth == 1 || depth == 2 || depth == 4 || depth == 8;
    case 2: case 4: case 6: return depth == 8 || depth == 16;
    default: return false;
  }
}

void check_ihdr(const ihdr_fields & h, int width, int height) {
  if (h.width == 0 || h.height == 0) png_decline("IHDR declares a " + std::to_string(h.width) + "x" + std::to_string(h.height) + " image");
  if (h.width > uint32_t(decode_max_side) || h.height > uint32_t(decode_max_side)) {
    png_decline("IHDR declares " + std::to_string(h.width) + "x" + std::to_string(h.height) + ", a side over " +
                std::to_string(decode_max_side));
  }
  if (!valid_depth(h.colour, h.depth)) {
    png_decline("IHDR has colour type " + std::to_string(h.colour) + " with bit depth " + std::to_string(h.depth) +
                ", which the PNG spec does not allow");
  }
  if (h.compression != 0 || h.filter != 0 || h.interlace > 1) {
    png_decline("IHDR has compression method " + std::to_string(h.compression) + ", filter method " +
                std::to_string(h.filter) + ", interlace method " + std::to_string(h.interlace) +
                " (the spec allows 0, 0 and 0/1)");
  }
  if (h.interlace == 1) png_decline("Adam7-interlaced (only non-interlaced files are read here)");
  if (h.colour == 0 && h.depth == 16) png_decline("16-bit greyscale (the server clips it to 0..255 itself)");
  if (h.colour == 0 && h.depth < 8) png_decline(std::to_string(h.depth) + "-bit greyscale (only 8-bit grey is read here)");
  if (h.width != uint32_t(width) || h.height != uint32_t(height)) {
    png_decline("IHDR says " + std::to_string(h.width) + "x" + std::to_string(h.height) + " but " +
                std::to_string(width) + "x" + std::to_string(height) + " was declared");
  }
}

// tRNS's length must fit the colour type (libpng warns and drops it otherwise).
void check_trns(const ihdr_fields & h, uint32_t len, int palette_size, size_t pos) {
  bool ok = false;
  if (h.colour == 0) ok = len == 2;
  if (h.colour == 2) ok = len == 6;
  if (h.colour == 3) ok = palette_size > 0 && len >= 1 && len <= uint32_t(palette_size);
  if (!ok) {
    png_decline("a tRNS chunk of " + std::to_string(len) + " bytes does not fit colour type " +
                std::to_string(h.colour) + (h.colour == 3 && palette_size == 0 ? " (it comes before PLTE)" : "") + at(pos));
  }
}

struct inflater_deleter {
  void operator()(libdeflate_decompressor * d) const { libdeflate_free_decompressor(d); }
};

libdeflate_decompressor * thread_inflater() {
  thread_local std::unique_ptr<libdeflate_decompressor, inflater_deleter> d(libdeflate_alloc_decompressor());
  if (!d) throw std::bad_alloc();
  return d.get();
}

const char * inflate_result_name(libdeflate_result r) {
  switch (r) {
    case LIBDEFLATE_BAD_DATA: return "the zlib stream is corrupt";
    case LIBDEFLATE_SHORT_OUTPUT: return "the zlib stream ends before the image's last row";
    case LIBDEFLATE_INSUFFICIENT_SPACE: return "the zlib stream holds more data than the image's rows";
    default: return "the zlib stream did not inflate";
  }
}

}  // namespace

void decode_png(const uint8_t * data, size_t size, int width, int height, uint8_t * out) {
  static const uint8_t signature[8] = {0x89, 'P', 'N', 'G', 0x0d, 0x0a, 0x1a, 0x0a};
  if (size < 8 || std::memcmp(data, signature, 8) != 0) png_decline("no PNG signature in the first 8 bytes");
  ihdr_fields h{};
  const uint8_t * palette = nullptr;
  int palette_size = 0;
  std::vector<std::pair<const uint8_t *, size_t>> idats;
  bool idat_ended = false, seen_iend = false, seen_trns = false;
  int ancillary = 0;
  size_t pos = 8;
  for (int index = 0; !seen_iend; ++index) {
    if (size - pos < 12) png_decline("truncated: the file ends inside a chunk header" + at(pos) + " (no IEND)");
    const uint32_t len = be32(data + pos);
    const uint8_t * type = data + pos + 4;
    const std::string name(reinterpret_cast<const char *>(type), 4);
    if (len > 0x7fffffffu) png_decline("chunk length " + std::to_string(len) + " over 2^31-1" + at(pos));
    if (size - pos - 12 < len) png_decline("truncated: chunk '" + name + "' of " + std::to_string(len) + " bytes runs past the end" + at(pos));
    for (int i = 0; i < 4; ++i) {
      if (!is_letter(type[i])) png_decline("a chunk type that is not 4 letters" + at(pos));
    }
    const uint8_t * body = data + pos + 8;
    const uint32_t crc = be32(body + len);
    if (uint32_t(libdeflate_crc32(0, type, size_t(len) + 4)) != crc) png_decline("CRC mismatch in chunk '" + name + "'" + at(pos));
    const bool critical = type[0] <= 'Z';
    if (type[2] > 'Z') png_decline("chunk '" + name + "' has the reserved bit set (third letter lower-case)" + at(pos));
    if (index == 0) {
      if (name != "IHDR" || len != 13) png_decline("the first chunk is '" + name + "' of " + std::to_string(len) + " bytes, not IHDR of 13");
      h = {be32(body), be32(body + 4), body[8], body[9], body[10], body[11], body[12]};
      check_ihdr(h, width, height);
    } else if (name == "IDAT") {
      if (idat_ended) png_decline("IDAT chunks are not contiguous (another chunk between them)" + at(pos));
      if (h.colour == 3 && !palette) png_decline("a palette image without PLTE before its IDAT" + at(pos));
      idats.emplace_back(body, len);
    } else {
      if (!idats.empty()) idat_ended = true;
      if (name == "IEND") {
        if (len != 0) png_decline("IEND carries " + std::to_string(len) + " bytes" + at(pos));
        if (idats.empty()) png_decline("no IDAT before IEND");
        seen_iend = true;
      } else if (name == "PLTE") {
        if (palette) png_decline("a second PLTE" + at(pos));
        if (!idats.empty()) png_decline("PLTE after IDAT" + at(pos));
        if (seen_trns) png_decline("PLTE after tRNS" + at(pos));
        if (h.colour == 0 || h.colour == 4) png_decline("PLTE in a greyscale image (colour type " + std::to_string(h.colour) + ")" + at(pos));
        if (len == 0 || len % 3 != 0 || len > 768 || (h.colour == 3 && len / 3 > (1u << h.depth))) {
          png_decline("PLTE of " + std::to_string(len) + " bytes (a multiple of 3, at most 3*2^depth entries)" + at(pos));
        }
        palette = body;
        palette_size = int(len / 3);
      } else if (name == "tRNS") {
        if (seen_trns) png_decline("a second tRNS" + at(pos));
        if (!idats.empty()) png_decline("tRNS after IDAT" + at(pos));
        check_trns(h, len, h.colour == 3 ? palette_size : 0, pos);
        seen_trns = true;
      } else if (name == "IHDR") {
        png_decline("a second IHDR" + at(pos));
      } else if (name == "acTL") {
        png_decline("an animated PNG (acTL): its frames are left to the server's decoder");
      } else if (critical) {
        png_decline("unknown critical chunk '" + name + "'" + at(pos));
      } else if (++ancillary > png_max_ancillary_chunks) {
        png_decline("more than " + std::to_string(png_max_ancillary_chunks) + " ancillary chunks");
      }
    }
    pos += 12 + size_t(len);
  }
  if (pos != size) png_decline(std::to_string(size - pos) + " bytes after IEND");

  const size_t w = h.width, rows = h.height;
  const size_t bits = w * size_t(channels_of(h.colour)) * size_t(h.depth);
  const size_t rowbytes = (bits + 7) / 8;
  const size_t bpp = std::max<size_t>(1, size_t(channels_of(h.colour) * h.depth / 8));
  const size_t stride = rowbytes + 1;
  const size_t expected = stride * rows;

  std::vector<uint8_t> joined;
  const uint8_t * zin = idats[0].first;
  size_t zlen = idats[0].second;
  if (idats.size() > 1) {
    size_t total = 0;
    for (const auto & c : idats) total += c.second;
    joined.reserve(total);
    for (const auto & c : idats) joined.insert(joined.end(), c.first, c.first + c.second);
    zin = joined.data();
    zlen = joined.size();
  }
  std::unique_ptr<uint8_t[]> raw(new uint8_t[expected]);
  size_t used = 0;
  const libdeflate_result r = libdeflate_zlib_decompress_ex(thread_inflater(), zin, zlen, raw.get(), expected, &used, nullptr);
  if (r != LIBDEFLATE_SUCCESS) {
    png_decline(std::string(inflate_result_name(r)) + " (" + std::to_string(expected) + " bytes expected for " +
                std::to_string(w) + "x" + std::to_string(rows) + ")");
  }
  if (used != zlen) png_decline(std::to_string(zlen - used) + " bytes of IDAT data after the end of the zlib stream");

  const png_pixels px{h.colour, h.depth, palette, palette_size};
  const uint8_t * prev = nullptr;
  for (size_t y = 0; y < rows; ++y) {
    uint8_t * line = raw.get() + y * stride;
    if (!png_unfilter_row(line[0], line + 1, prev, rowbytes, bpp)) {
      png_decline("row " + std::to_string(y) + " has filter type " + std::to_string(line[0]) + " (0..4 exist)");
    }
    const long bad = png_row_to_rgb(px, line + 1, int(w), out + y * w * 3);
    if (bad >= 0) {
      png_decline("palette index beyond the PLTE's " + std::to_string(palette_size) + " entries at row " +
                  std::to_string(y) + ", column " + std::to_string(bad));
    }
    prev = line + 1;
  }
}

}  // namespace rfdetr::decode_detail
