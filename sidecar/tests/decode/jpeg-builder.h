// libjpeg-written JPEG files for the decode tests, and a plain libjpeg decode (library defaults) to compare with.
#pragma once

#include <cstdint>
#include <vector>

#include "png-builder.h"

namespace decode_test {

struct jpeg_spec {
  int width = 16, height = 16;
  int components = 3;   // 1 grey, 3 RGB input, 4 CMYK input
  int quality = 90;
  int h_samp = 2, v_samp = 2;  // luma sampling factors (chroma 1x1)
  bool progressive = false, arithmetic = false, rgb_colourspace = false;
  int restart_rows = 0;
  bool scan_bomb = false;  // a progressive script of 128 scans (grey only)
  uint32_t seed = 1;
};

bytes make_jpeg(const jpeg_spec & s);
// RGB from libjpeg with its defaults, or empty when libjpeg fails.
bytes libjpeg_rgb(const bytes & file);

}  // namespace decode_test
