// bench-decode [--runs N] FILE...: the median (and min) thread CPU time of rfdetr::decode_rgb_into per file, after
// one warm-up decode. The format comes from the signature and the size from the file's own header (PNG IHDR,
// JPEG SOFn), as a client would declare them. A declined file prints the reason instead.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "decode/decode.h"

namespace {

double thread_cpu_ms() {
  timespec t{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return double(t.tv_sec) * 1e3 + double(t.tv_nsec) / 1e6;
}

// The SOFn frame header's size (every SOF marker but DHT C4, JPG C8 and DAC CC).
bool jpeg_size(const std::vector<uint8_t> & b, int & w, int & h) {
  size_t i = 2;
  while (i + 9 < b.size()) {
    if (b[i] != 0xff) return false;
    const uint8_t m = b[i + 1];
    if (m == 0xff) { ++i; continue; }
    const size_t len = (size_t(b[i + 2]) << 8) | b[i + 3];
    if (m >= 0xc0 && m <= 0xcf && m != 0xc4 && m != 0xc8 && m != 0xcc) {
      h = (b[i + 5] << 8) | b[i + 6];
      w = (b[i + 7] << 8) | b[i + 8];
      return true;
    }
    i += 2 + len;
  }
  return false;
}

}  // namespace

int main(int argc, char ** argv) {
  int runs = 30;
  std::vector<std::string> files;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--runs") == 0 && i + 1 < argc) {
      runs = std::max(1, std::atoi(argv[++i]));
    } else {
      files.emplace_back(argv[i]);
    }
  }
  if (files.empty()) {
    std::fprintf(stderr, "usage: bench-decode [--runs N] FILE...   (PNG or JPEG files)\n");
    return 2;
  }
  std::printf("%-40s %-5s %11s %10s %8s\n", "file", "fmt", "size", "median_ms", "min_ms");
  for (const auto & path : files) {
    std::ifstream in(path, std::ios::binary);
    const std::vector<uint8_t> data((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    int w = 0, h = 0;
    rfdetr::encoded_format f;
    if (data.size() > 24 && data[0] == 0x89 && data[1] == 'P') {
      f = rfdetr::encoded_format::png;
      w = (data[16] << 24) | (data[17] << 16) | (data[18] << 8) | data[19];
      h = (data[20] << 24) | (data[21] << 16) | (data[22] << 8) | data[23];
    } else if (data.size() > 4 && data[0] == 0xff && data[1] == 0xd8 && jpeg_size(data, w, h)) {
      f = rfdetr::encoded_format::jpeg;
    } else {
      std::fprintf(stderr, "bench-decode: %s is neither a PNG nor a JPEG with a frame header\n", path.c_str());
      return 1;
    }
    std::vector<uint8_t> out(size_t(std::max(w, 1)) * size_t(std::max(h, 1)) * 3);
    std::vector<double> ms;
    try {
      rfdetr::decode_rgb_into(f, data.data(), data.size(), w, h, out.data());  // warm-up
      for (int r = 0; r < runs; ++r) {
        const double t0 = thread_cpu_ms();
        rfdetr::decode_rgb_into(f, data.data(), data.size(), w, h, out.data());
        ms.push_back(thread_cpu_ms() - t0);
      }
    } catch (const rfdetr::decode_declined & e) {
      std::printf("%-40s declined: %s\n", path.c_str(), e.what());
      continue;
    }
    std::sort(ms.begin(), ms.end());
    const std::string base = path.substr(path.find_last_of('/') + 1);
    std::printf("%-40s %-5s %5dx%-5d %10.3f %8.3f\n", base.c_str(), rfdetr::encoded_format_name(f), w, h,
                ms[ms.size() / 2], ms.front());
  }
  return 0;
}
