// PNG scanline work after inflate: undoing the per-row filters and converting a row to RGB u8.
#pragma once

#include <cstddef>
#include <cstdint>

namespace rfdetr::decode_detail {

// Undoes one row's filter in place. row: rowbytes bytes after the filter byte; prev: the previous row already
// unfiltered, or nullptr for the first row (all zero). bpp: bytes per complete pixel, at least 1.
// Returns false for a filter byte other than 0..4.
bool png_unfilter_row(uint8_t filter, uint8_t * row, const uint8_t * prev, size_t rowbytes, size_t bpp);

// The Paeth filter's implementations (for the tests: each must agree with the scalar one).
void png_unpaeth_scalar(uint8_t * row, const uint8_t * prev, size_t rowbytes, size_t bpp);
// SSE4.1 versions for bpp 3 and 4 (compiled with a target attribute, called only when the CPU has it).
void png_unpaeth_sse41(uint8_t * row, const uint8_t * prev, size_t rowbytes, size_t bpp);
bool png_has_sse41();

struct png_pixels {
  int colour;                 // 0 grey, 2 RGB, 3 palette, 4 grey+alpha, 6 RGBA
  int depth;                  // bits per sample
  const uint8_t * palette;    // 3 * palette_size bytes (colour 3)
  int palette_size;
};

// Converts one unfiltered row of width pixels into width*3 RGB bytes. Returns -1, or for a palette index at or
// beyond palette_size the first offending pixel's x.
long png_row_to_rgb(const png_pixels & px, const uint8_t * row, int width, uint8_t * out);

}  // namespace rfdetr::decode_detail
