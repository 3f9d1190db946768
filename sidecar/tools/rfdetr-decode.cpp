// rfdetr-decode jpeg|png FILE WIDTH HEIGHT: the in-sidecar decode (sidecar/src/decode) as a command, for the
// identity test against the server's decode (test/image/sidecar-decode-identity.test.ts) and for people.
// Writes width*height*3 bytes of RGB to stdout. Exit 0 decoded, 3 declined (the reason on stderr), 2 usage or I/O.
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "decode/decode.h"

namespace {

int usage(const char * why) {
  std::fprintf(stderr,
               "rfdetr-decode: %s\n"
               "usage: rfdetr-decode jpeg|png FILE WIDTH HEIGHT   (raw RGB u8 to stdout; exit 0 ok, 3 declined, 2 usage)\n",
               why);
  return 2;
}

bool parse_side(const char * s, int & v) {
  char * end = nullptr;
  errno = 0;
  const long n = std::strtol(s, &end, 10);
  if (errno != 0 || end == s || *end != '\0' || n < 1 || n > rfdetr::decode_max_side) return false;
  v = int(n);
  return true;
}

}  // namespace

int main(int argc, char ** argv) {
  if (argc != 5) return usage("expected 4 arguments");
  const std::string fmt = argv[1];
  if (fmt != "jpeg" && fmt != "png") return usage(("the format is '" + fmt + "'; expected jpeg or png").c_str());
  int w = 0, h = 0;
  if (!parse_side(argv[3], w) || !parse_side(argv[4], h)) {
    return usage(("WIDTH and HEIGHT must be integers in 1.." + std::to_string(rfdetr::decode_max_side)).c_str());
  }
  std::FILE * f = std::fopen(argv[2], "rb");
  if (!f) return usage((std::string("cannot open ") + argv[2] + ": " + std::strerror(errno)).c_str());
  std::vector<uint8_t> data;
  uint8_t buf[1 << 16];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, f)) > 0) data.insert(data.end(), buf, buf + n);
  const bool failed = std::ferror(f) != 0;
  std::fclose(f);
  if (failed) return usage((std::string("cannot read ") + argv[2]).c_str());
  try {
    const auto rgb = rfdetr::decode_rgb(fmt == "jpeg" ? rfdetr::encoded_format::jpeg : rfdetr::encoded_format::png,
                                        data.data(), data.size(), w, h);
    if (std::fwrite(rgb.data(), 1, rgb.size(), stdout) != rgb.size() || std::fflush(stdout) != 0) {
      return usage("cannot write the pixels to stdout");
    }
  } catch (const rfdetr::decode_declined & e) {
    std::fprintf(stderr, "rfdetr-decode: declined: %s\n", e.what());
    return 3;
  }
  return 0;
}
