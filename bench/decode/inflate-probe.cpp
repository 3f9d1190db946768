// inflate-probe [--runs N] [--isal-slack BYTES] [--isal-no-adler] FILE...: libdeflate vs Intel ISA-L on each PNG's IDAT stream (never a test). Per file,
// after one warm-up, alternating the two libraries run by run, the median thread CPU time of:
//   inflate  libdeflate_zlib_decompress_ex vs isal_inflate_stateless (crc_flag ISAL_ZLIB: header and ADLER-32
//            trailer checked by ISA-L), both into a buffer of exactly height*(1+rowbytes) bytes;
//   crc      libdeflate_crc32 vs crc32_gzip_refl over every chunk's type+data (what the chunk walk checks);
//   adler    libdeflate_adler32 vs isal_adler32 over the inflated bytes;
//   decode   rfdetr::decode_rgb_into as built (libdeflate), and that minus libdeflate's inflate plus ISA-L's.
// Both inflates must give the same bytes (else the file is reported and skipped). Prints one Markdown row a file.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <fstream>
#include <iterator>
#include <memory>
#include <string>
#include <vector>

#include <isa-l/crc.h>
#include <isa-l/igzip_lib.h>
#include <libdeflate.h>

#include "decode/decode.h"

namespace {

double thread_cpu_ms() {
  timespec t{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return double(t.tv_sec) * 1e3 + double(t.tv_nsec) / 1e6;
}

uint32_t be32(const uint8_t * p) {
  return (uint32_t(p[0]) << 24) | (uint32_t(p[1]) << 16) | (uint32_t(p[2]) << 8) | uint32_t(p[3]);
}

struct png_parts {
  int width = 0, height = 0, depth = 0, colour = 0, interlace = 0;
  std::vector<uint8_t> idat;                                // the IDATs joined
  std::vector<std::pair<const uint8_t *, size_t>> chunks;   // type+data of every chunk, for the CRC
  size_t expected = 0;                                      // height * (1 + rowbytes)
};

bool parse(const std::vector<uint8_t> & d, png_parts & p, std::string & why) {
  if (d.size() < 33 || d[0] != 0x89 || d[1] != 'P') return why = "not a PNG", false;
  size_t pos = 8;
  while (pos + 12 <= d.size()) {
    const uint32_t len = be32(&d[pos]);
    if (d.size() - pos - 12 < len) return why = "truncated", false;
    const uint8_t * type = &d[pos + 4];
    const uint8_t * body = type + 4;
    p.chunks.emplace_back(type, size_t(len) + 4);
    if (std::memcmp(type, "IHDR", 4) == 0) {
      p.width = int(be32(body));
      p.height = int(be32(body + 4));
      p.depth = body[8];
      p.colour = body[9];
      p.interlace = body[12];
    } else if (std::memcmp(type, "IDAT", 4) == 0) {
      p.idat.insert(p.idat.end(), body, body + len);
    } else if (std::memcmp(type, "IEND", 4) == 0) {
      break;
    }
    pos += 12 + size_t(len);
  }
  if (p.interlace != 0) return why = "interlaced (the decoder declines it)", false;
  const int channels[] = {1, 0, 3, 1, 2, 0, 4};
  if (p.colour > 6 || channels[p.colour] == 0 || p.idat.empty()) return why = "no IHDR/IDAT of a known colour type", false;
  const size_t rowbytes = (size_t(p.width) * size_t(channels[p.colour]) * size_t(p.depth) + 7) / 8;
  p.expected = size_t(p.height) * (rowbytes + 1);
  return true;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

struct isal_state_deleter {
  void operator()(inflate_state * s) const { std::free(s); }
};

}  // namespace

int main(int argc, char ** argv) {
  int runs = 31;
  size_t isal_slack = 0;  // --isal-slack N: ISA-L writes into a buffer N bytes longer than the image (does the exact size cost it?)
  bool isal_no_adler = false;  // --isal-no-adler: ISA-L inflates the raw deflate data (header skipped, no ADLER-32): what the checksum costs it
  std::vector<std::string> files;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--runs") == 0 && i + 1 < argc) {
      runs = std::max(1, std::atoi(argv[++i]));
    } else if (std::strcmp(argv[i], "--isal-slack") == 0 && i + 1 < argc) {
      isal_slack = size_t(std::atoll(argv[++i]));
    } else if (std::strcmp(argv[i], "--isal-no-adler") == 0) {
      isal_no_adler = true;
    } else {
      files.emplace_back(argv[i]);
    }
  }
  if (files.empty()) {
    std::fprintf(stderr, "usage: inflate-probe [--runs N] [--isal-slack BYTES] [--isal-no-adler] PNG...\n");
    return 2;
  }
  libdeflate_decompressor * ld = libdeflate_alloc_decompressor();
  std::unique_ptr<inflate_state, isal_state_deleter> st(static_cast<inflate_state *>(std::malloc(sizeof(inflate_state))));
  if (!ld || !st) return 1;
  std::printf("| file | px | IDAT bytes | raw bytes | inflate libdeflate ms | inflate ISA-L ms | ISA-L / libdeflate | "
              "decode ms (libdeflate) | decode ms (ISA-L, derived) | crc32 libdeflate / ISA-L ms | adler32 libdeflate / ISA-L ms |\n");
  std::printf("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n");
  int failures = 0;
  for (const auto & path : files) {
    std::ifstream in(path, std::ios::binary);
    const std::vector<uint8_t> data((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    png_parts p;
    std::string why;
    if (!parse(data, p, why)) {
      std::fprintf(stderr, "inflate-probe: %s skipped: %s\n", path.c_str(), why.c_str());
      continue;
    }
    std::vector<uint8_t> a(p.expected), b(p.expected + isal_slack), rgb(size_t(p.width) * size_t(p.height) * 3);
    auto run_libdeflate = [&]() {
      size_t used = 0;
      return libdeflate_zlib_decompress_ex(ld, p.idat.data(), p.idat.size(), a.data(), a.size(), &used, nullptr) ==
                 LIBDEFLATE_SUCCESS && used == p.idat.size();
    };
    int isal_ret = 0;
    auto run_isal = [&]() {
      isal_inflate_init(st.get());
      st->next_in = const_cast<uint8_t *>(p.idat.data()) + (isal_no_adler ? 2 : 0);
      st->avail_in = uint32_t(p.idat.size()) - (isal_no_adler ? 2 : 0);
      st->next_out = b.data();
      st->avail_out = uint32_t(b.size());
      st->crc_flag = isal_no_adler ? ISAL_DEFLATE : ISAL_ZLIB;
      isal_ret = isal_inflate_stateless(st.get());
      return isal_ret == ISAL_DECOMP_OK && st->total_out == p.expected;
    };
    bool decodes = true;
    auto run_decode = [&]() {
      try {
        rfdetr::decode_rgb_into(rfdetr::encoded_format::png, data.data(), data.size(), p.width, p.height, rgb.data());
      } catch (const rfdetr::decode_declined &) {
        decodes = false;
      }
    };
    const bool ok_a = run_libdeflate(), ok_b = run_isal();
    if (!ok_a || !ok_b || !std::equal(a.begin(), a.end(), b.begin())) {
      std::fprintf(stderr, "inflate-probe: %s: libdeflate %s, ISA-L returned %d with %u bytes out, avail_in %u; outputs %s\n",
                   path.c_str(), ok_a ? "ok" : "failed", isal_ret, st->total_out, st->avail_in, std::equal(a.begin(), a.end(), b.begin()) ? "equal" : "differ");
      ++failures;
      continue;
    }
    run_decode();
    std::vector<double> t_ld, t_is, t_dec, c_ld, c_is, ad_ld, ad_is;
    uint32_t sink = 0;
    for (int r = 0; r < runs; ++r) {
      double t0 = thread_cpu_ms();
      run_libdeflate();
      t_ld.push_back(thread_cpu_ms() - t0);
      t0 = thread_cpu_ms();
      run_isal();
      t_is.push_back(thread_cpu_ms() - t0);
      t0 = thread_cpu_ms();
      run_decode();
      t_dec.push_back(thread_cpu_ms() - t0);
      t0 = thread_cpu_ms();
      for (const auto & c : p.chunks) sink ^= uint32_t(libdeflate_crc32(0, c.first, c.second));
      c_ld.push_back(thread_cpu_ms() - t0);
      t0 = thread_cpu_ms();
      for (const auto & c : p.chunks) sink ^= crc32_gzip_refl(0, c.first, c.second);
      c_is.push_back(thread_cpu_ms() - t0);
      t0 = thread_cpu_ms();
      sink ^= uint32_t(libdeflate_adler32(1, a.data(), a.size()));
      ad_ld.push_back(thread_cpu_ms() - t0);
      t0 = thread_cpu_ms();
      sink ^= isal_adler32(1, a.data(), a.size());
      ad_is.push_back(thread_cpu_ms() - t0);
    }
    for (const auto & c : p.chunks) {
      if (uint32_t(libdeflate_crc32(0, c.first, c.second)) != crc32_gzip_refl(0, c.first, c.second)) {
        std::fprintf(stderr, "inflate-probe: %s: crc32_gzip_refl differs from libdeflate_crc32\n", path.c_str());
        ++failures;
      }
    }
    if (uint32_t(libdeflate_adler32(1, a.data(), a.size())) != isal_adler32(1, a.data(), a.size())) {
      std::fprintf(stderr, "inflate-probe: %s: isal_adler32 differs from libdeflate_adler32\n", path.c_str());
      ++failures;
    }
    const double ld_ms = median(t_ld), is_ms = median(t_is), dec_ms = median(t_dec);
    const std::string base = path.substr(path.find_last_of('/') + 1);
    std::printf("| %s | %dx%d | %zu | %zu | %.3f | %.3f | %.2f | %s | %s | %.3f / %.3f | %.3f / %.3f |\n", base.c_str(),
                p.width, p.height, p.idat.size(), p.expected, ld_ms, is_ms, is_ms / ld_ms,
                decodes ? std::to_string(dec_ms).substr(0, 6).c_str() : "declined",
                decodes ? std::to_string(dec_ms - ld_ms + is_ms).substr(0, 6).c_str() : "-", median(c_ld), median(c_is),
                median(ad_ld), median(ad_is));
    std::fflush(stdout);
    if (sink == 0x12345678u) std::fprintf(stderr, " ");
  }
  libdeflate_free_decompressor(ld);
  return failures == 0 ? 0 : 1;
}
