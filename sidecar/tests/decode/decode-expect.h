// Assertions shared by the decode tests.
#pragma once

#include <string>

#include <gtest/gtest.h>

#include "decode/decode.h"
#include "png-builder.h"

namespace decode_test {

// Declined, with a message that contains `reason`.
inline void expect_declined(rfdetr::encoded_format f, const bytes & file, int w, int h, const std::string & reason) {
  try {
    rfdetr::decode_rgb(f, file.data(), file.size(), w, h);
    ADD_FAILURE() << "accepted; expected a decline naming '" << reason << "'";
  } catch (const rfdetr::decode_declined & e) {
    EXPECT_NE(std::string(e.what()).find(reason), std::string::npos)
        << "declined with '" << e.what() << "'; expected it to name '" << reason << "'";
  }
}

inline void expect_png_declined(const bytes & file, int w, int h, const std::string & reason) {
  expect_declined(rfdetr::encoded_format::png, file, w, h, reason);
}

}  // namespace decode_test
