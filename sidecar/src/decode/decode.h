// Decodes plain JPEG and PNG files to 8-bit RGB inside the sidecar, bit-identical to the server's own decode
// (src/image/decode.ts `decodeImage`: sharp with failOn 'error', ignoreIcc, no auto-orientation, then removeAlpha
// and toColourspace('srgb'), i.e. Pillow's convert("RGB"): alpha dropped, palette/grey expanded, 16-bit samples
// keep their high byte, EXIF orientation and ICC profiles ignored).
//
// Anything this decoder cannot reproduce exactly, or that is corrupt, truncated or odd, is DECLINED with
// decode_declined, never approximated: the caller then lets the server decode the file itself. Declined forms:
// PNG  - Adam7 interlace, 16-bit grey (the server clips it), 1/2/4-bit grey, a CRC mismatch, an unknown critical
//        chunk, more than 100 ancillary chunks, IDATs that are not contiguous, bytes after IEND, a zlib stream that
//        does not inflate to exactly the image's size, a bad filter byte, a palette index beyond PLTE, APNG (acTL);
// JPEG - CMYK/YCCK, precision other than 8, component counts other than 1 and 3, any libjpeg warning (corrupt
//        data, extraneous bytes, premature end), more than 100 scans;
// both - sides over 8192, or a header whose size differs from the declared width/height.
#pragma once

#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <vector>

namespace rfdetr {

enum class encoded_format { jpeg, png };

// Thrown when the bytes are not a file this decoder reads exactly as the server would (or are corrupt,
// truncated, or disagree with the declared size); what() says why, in words a log reader understands.
struct decode_declined : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// Decodes into out (exactly width*height*3 bytes, RGB u8 HWC row-major, caller-owned). width/height are what
// the client declared; a file whose own header differs is declined. On a decline, out holds unspecified bytes.
// Thread-safe (no shared state beyond a per-thread inflate context).
void decode_rgb_into(encoded_format f, const uint8_t * data, size_t size, int width, int height, uint8_t * out);
std::vector<uint8_t> decode_rgb(encoded_format f, const uint8_t * data, size_t size, int width, int height);

// The largest side accepted (src/image/limits.ts MAX_IMAGE_SIDE).
constexpr int decode_max_side = 8192;
// The most JPEG scans read before a progressive file is declined (a scan bomb costs a pass over the image each).
constexpr int jpeg_max_scans = 100;
// The most ancillary PNG chunks read before a file is declined.
constexpr int png_max_ancillary_chunks = 100;

const char * encoded_format_name(encoded_format f);

}  // namespace rfdetr
