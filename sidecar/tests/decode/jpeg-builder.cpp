// Writes JPEGs with libjpeg-turbo's compressor (the forms the decode tests need) and decodes them with its defaults.
#include "jpeg-builder.h"

#include <csetjmp>
#include <cstdio>
#include <cstdlib>
#include <stdexcept>

#include <jpeglib.h>

namespace decode_test {
namespace {

struct throwing_err {
  jpeg_error_mgr pub;
  std::jmp_buf jump;
};

void jump_out(j_common_ptr c) { std::longjmp(reinterpret_cast<throwing_err *>(c->err)->jump, 1); }

// Smooth content with some detail, so every DCT coefficient and the upsampling matter.
bytes picture(int w, int h, int comps, uint32_t seed) {
  bytes px(size_t(w) * h * comps);
  const bytes noise = lcg_bytes(px.size(), seed);
  for (int y = 0; y < h; ++y)
    for (int x = 0; x < w; ++x)
      for (int c = 0; c < comps; ++c) {
        const size_t i = (size_t(y) * w + x) * comps + c;
        px[i] = uint8_t((x * 7 + y * 3 * (c + 1) + c * 60) + (noise[i] & 31));
      }
  return px;
}

}  // namespace

bytes make_jpeg(const jpeg_spec & s) {
  jpeg_compress_struct c;
  throwing_err err;
  c.err = jpeg_std_error(&err.pub);
  err.pub.error_exit = jump_out;
  unsigned char * buf = nullptr;
  unsigned long len = 0;
  jpeg_scan_info * scans = nullptr;
  if (setjmp(err.jump)) {
    jpeg_destroy_compress(&c);
    std::free(buf);
    std::free(scans);
    throw std::runtime_error("make_jpeg: libjpeg failed");
  }
  jpeg_create_compress(&c);
  jpeg_mem_dest(&c, &buf, &len);
  c.image_width = JDIMENSION(s.width);
  c.image_height = JDIMENSION(s.height);
  c.input_components = s.components;
  c.in_color_space = s.components == 1 ? JCS_GRAYSCALE : s.components == 4 ? JCS_CMYK : JCS_RGB;
  jpeg_set_defaults(&c);
  if (s.rgb_colourspace) jpeg_set_colorspace(&c, JCS_RGB);
  jpeg_set_quality(&c, s.quality, TRUE);
  if (s.components == 3 && !s.rgb_colourspace) {
    c.comp_info[0].h_samp_factor = s.h_samp;
    c.comp_info[0].v_samp_factor = s.v_samp;
  }
  if (s.progressive) jpeg_simple_progression(&c);
  if (s.scan_bomb) {
    // DC first/refine, then each AC band first at Al=1 and refined: 2 + 63 + 63 = 128 scans.
    scans = static_cast<jpeg_scan_info *>(std::calloc(128, sizeof(jpeg_scan_info)));
    int n = 0;
    scans[n++] = {1, {0}, 0, 0, 0, 1};
    scans[n++] = {1, {0}, 0, 0, 1, 0};
    for (int k = 1; k < 64; ++k) scans[n++] = {1, {0}, k, k, 0, 1};
    for (int k = 1; k < 64; ++k) scans[n++] = {1, {0}, k, k, 1, 0};
    c.scan_info = scans;
    c.num_scans = n;
  }
  c.arith_code = s.arithmetic ? TRUE : FALSE;
  c.restart_in_rows = s.restart_rows;
  jpeg_start_compress(&c, TRUE);
  const bytes px = picture(s.width, s.height, s.components, s.seed);
  while (c.next_scanline < c.image_height) {
    JSAMPROW row = const_cast<JSAMPROW>(px.data() + size_t(c.next_scanline) * s.width * s.components);
    jpeg_write_scanlines(&c, &row, 1);
  }
  jpeg_finish_compress(&c);
  jpeg_destroy_compress(&c);
  bytes out(buf, buf + len);
  std::free(buf);
  std::free(scans);
  return out;
}

bytes libjpeg_rgb(const bytes & file) {
  jpeg_decompress_struct d;
  throwing_err err;
  d.err = jpeg_std_error(&err.pub);
  err.pub.error_exit = jump_out;
  bytes * out = new bytes();
  if (setjmp(err.jump)) {
    jpeg_destroy_decompress(&d);
    delete out;
    return {};
  }
  jpeg_create_decompress(&d);
  jpeg_mem_src(&d, file.data(), static_cast<unsigned long>(file.size()));
  jpeg_read_header(&d, TRUE);
  d.out_color_space = JCS_RGB;
  jpeg_start_decompress(&d);
  out->resize(size_t(d.output_width) * d.output_height * 3);
  while (d.output_scanline < d.output_height) {
    JSAMPROW row = out->data() + size_t(d.output_scanline) * d.output_width * 3;
    jpeg_read_scanlines(&d, &row, 1);
  }
  jpeg_finish_decompress(&d);
  jpeg_destroy_decompress(&d);
  bytes r = std::move(*out);
  delete out;
  return r;
}

}  // namespace decode_test
