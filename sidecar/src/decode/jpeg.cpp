// JPEG through the system libjpeg-turbo, with the decompressor settings libvips' jpegload uses at full size
// (sharp's decode): JDCT_ISLOW, fancy upsampling, block smoothing, no scaling, no quantisation. Every libjpeg
// warning declines (sharp would read on; we let the server decide), as do CMYK/YCCK, precisions other than 8
// and component counts other than 1 and 3. libjpeg's errors longjmp out of its C frames into decode_c, which
// holds no C++ object, and the C++ wrapper turns the message into decode_declined.
#include <csetjmp>
#include <cstdio>
#include <cstring>
#include <string>

#include <jpeglib.h>

#include "decode/decode-internal.h"
#include "decode/decode.h"

namespace rfdetr::decode_detail {
namespace {

// Lives in decode_jpeg's frame, not decode_c's: what libjpeg changes before a longjmp stays well-defined.
// pub comes first: libjpeg hands back cinfo->err, which guard_of() turns into the guard.
struct jpeg_guard {
  jpeg_error_mgr pub;
  jpeg_decompress_struct cinfo;
  jpeg_progress_mgr progress;
  std::jmp_buf jump;
  char why[JMSG_LENGTH_MAX + 128];
};

jpeg_guard * guard_of(j_common_ptr cinfo) { return reinterpret_cast<jpeg_guard *>(cinfo->err); }

void on_error(j_common_ptr cinfo) {
  jpeg_guard * g = guard_of(cinfo);
  char msg[JMSG_LENGTH_MAX];
  (*cinfo->err->format_message)(cinfo, msg);
  std::snprintf(g->why, sizeof g->why, "libjpeg error: %s", msg);
  std::longjmp(g->jump, 1);
}

// msg_level -1 is a warning (corrupt data, extraneous bytes, premature end); 0.. are trace messages.
void on_message(j_common_ptr cinfo, int msg_level) {
  if (msg_level >= 0) return;
  jpeg_guard * g = guard_of(cinfo);
  char msg[JMSG_LENGTH_MAX];
  (*cinfo->err->format_message)(cinfo, msg);
  std::snprintf(g->why, sizeof g->why, "libjpeg warning (the server's decoder reads past it; this one does not): %s",
                msg);
  std::longjmp(g->jump, 1);
}

void on_output(j_common_ptr) {}

// Called per iMCU row and at each start of scan while a multi-scan file is buffered.
void on_progress(j_common_ptr cinfo) {
  auto * d = reinterpret_cast<j_decompress_ptr>(cinfo);
  if (d->input_scan_number > jpeg_max_scans) {
    std::snprintf(guard_of(cinfo)->why, sizeof guard_of(cinfo)->why,
                  "more than %d scans (a progressive file this many scans would cost a pass over the image each)",
                  jpeg_max_scans);
    std::longjmp(guard_of(cinfo)->jump, 1);
  }
}

const char * colour_space_name(J_COLOR_SPACE c) {
  switch (c) {
    case JCS_GRAYSCALE: return "greyscale";
    case JCS_RGB: return "RGB";
    case JCS_YCbCr: return "YCbCr";
    case JCS_CMYK: return "CMYK";
    case JCS_YCCK: return "YCCK";
    default: return "unknown";
  }
}

// Returns 0 when out holds the image, else 1 with g->why set. No C++ object lives across the setjmp.
int decode_c(jpeg_guard * g, const uint8_t * data, size_t size, int width, int height, uint8_t * out) {
  jpeg_decompress_struct & cinfo = g->cinfo;
  cinfo.err = jpeg_std_error(&g->pub);
  g->pub.error_exit = on_error;
  g->pub.emit_message = on_message;
  g->pub.output_message = on_output;
  g->progress.progress_monitor = on_progress;
  if (setjmp(g->jump)) {
    jpeg_destroy_decompress(&cinfo);
    return 1;
  }
  jpeg_create_decompress(&cinfo);
  cinfo.progress = &g->progress;
  jpeg_mem_src(&cinfo, data, static_cast<unsigned long>(size));
  if (jpeg_read_header(&cinfo, TRUE) != JPEG_HEADER_OK) {
    std::snprintf(g->why, sizeof g->why, "the stream holds tables only, no image");
    jpeg_destroy_decompress(&cinfo);
    return 1;
  }
  const char * bad = nullptr;
  if (cinfo.data_precision != 8) {
    std::snprintf(g->why, sizeof g->why, "%d-bit samples (only 8-bit is read here)", cinfo.data_precision);
    bad = g->why;
  } else if (cinfo.jpeg_color_space == JCS_CMYK || cinfo.jpeg_color_space == JCS_YCCK) {
    std::snprintf(g->why, sizeof g->why,
                  "a %s JPEG (the server converts it to sRGB through a CMYK profile)",
                  colour_space_name(cinfo.jpeg_color_space));
    bad = g->why;
  } else if (cinfo.num_components != 1 && cinfo.num_components != 3) {
    std::snprintf(g->why, sizeof g->why, "%d components (only 1 and 3 are read here)", cinfo.num_components);
    bad = g->why;
  } else if (!(cinfo.num_components == 1 ? cinfo.jpeg_color_space == JCS_GRAYSCALE
                                         : (cinfo.jpeg_color_space == JCS_YCbCr || cinfo.jpeg_color_space == JCS_RGB))) {
    std::snprintf(g->why, sizeof g->why, "%d components in the %s colour space", cinfo.num_components,
                  colour_space_name(cinfo.jpeg_color_space));
    bad = g->why;
  } else if (cinfo.image_width != unsigned(width) || cinfo.image_height != unsigned(height)) {
    std::snprintf(g->why, sizeof g->why, "the header says %ux%u but %dx%d was declared", cinfo.image_width,
                  cinfo.image_height, width, height);
    bad = g->why;
  }
  if (bad) {
    jpeg_destroy_decompress(&cinfo);
    return 1;
  }
  // libvips' full-size settings (its jpeg2vips leaves the library defaults; spelled out so a default change shows).
  cinfo.out_color_space = JCS_RGB;  // grey is replicated to (g, g, g), as toColourspace('srgb') does
  cinfo.scale_num = 1;
  cinfo.scale_denom = 1;
  cinfo.dct_method = JDCT_ISLOW;
  cinfo.do_fancy_upsampling = TRUE;
  cinfo.do_block_smoothing = TRUE;
  cinfo.quantize_colors = FALSE;
  cinfo.buffered_image = FALSE;
  cinfo.raw_data_out = FALSE;
  jpeg_start_decompress(&cinfo);
  if (cinfo.output_width != unsigned(width) || cinfo.output_height != unsigned(height) ||
      cinfo.output_components != 3) {
    std::snprintf(g->why, sizeof g->why, "libjpeg would output %ux%ux%d, not %dx%dx3", cinfo.output_width,
                  cinfo.output_height, cinfo.output_components, width, height);
    jpeg_destroy_decompress(&cinfo);
    return 1;
  }
  const size_t stride = size_t(width) * 3;
  JSAMPROW rows[16];
  while (cinfo.output_scanline < cinfo.output_height) {
    const unsigned y = cinfo.output_scanline;
    const unsigned n = cinfo.output_height - y < 16 ? cinfo.output_height - y : 16;
    for (unsigned i = 0; i < n; ++i) rows[i] = out + (y + i) * stride;
    if (jpeg_read_scanlines(&cinfo, rows, n) == 0) {
      std::snprintf(g->why, sizeof g->why, "libjpeg returned no rows at row %u", y);
      jpeg_destroy_decompress(&cinfo);
      return 1;
    }
  }
  jpeg_finish_decompress(&cinfo);  // reads to EOI: a warning there (trailing garbage in the scan) declines too
  jpeg_destroy_decompress(&cinfo);
  return 0;
}

}  // namespace

void decode_jpeg(const uint8_t * data, size_t size, int width, int height, uint8_t * out) {
  jpeg_guard g;
  std::memset(&g, 0, sizeof g);
  if (decode_c(&g, data, size, width, height, out) != 0) decline(std::string("jpeg: ") + g.why);
}

}  // namespace rfdetr::decode_detail
