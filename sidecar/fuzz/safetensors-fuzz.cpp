// libFuzzer target: a malicious model.safetensors header. The input is [u32 LE data-section size D][header JSON];
// the file handed to the loader is [u64 LE header length][header][D data bytes], the data section being a lazily
// mapped zero region (the loader checks offsets against it and never reads it while parsing), so the fuzzer can
// satisfy the offset/tiling checks without writing megabytes. safetensors_parse validates the container, then
// checkpoint_check_tensors identifies the variant from the key set and shapes (either key naming, the
// transformers key map's regexes included). Only rfdetr::error may leave it; an accepted header must describe
// tensors that tile the data section.
#include "common/error.h"
#include "model/checkpoint.h"
#include "model/safetensors.h"

#include <sys/mman.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>

namespace {

// Larger than any supported checkpoint's data (seg-2xlarge is the largest), reserved, never committed.
constexpr size_t k_region = size_t(1) << 31;

uint8_t * region() {
  static uint8_t * r = [] {
    void * p = mmap(nullptr, k_region, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p == MAP_FAILED) abort();
    return static_cast<uint8_t *>(p);
  }();
  return r;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t * data, size_t size) {
  if (size < 4) return 0;
  const uint64_t d = uint64_t(data[0]) | uint64_t(data[1]) << 8 | uint64_t(data[2]) << 16 | uint64_t(data[3]) << 24;
  const uint64_t n = size - 4;
  if (8 + n + d > k_region) return 0;
  uint8_t * file = region();
  for (int i = 0; i < 8; i++) file[i] = uint8_t(n >> (8 * i));
  std::memcpy(file + 8, data + 4, n);
  const size_t file_size = size_t(8 + n + d);
  try {
    const rfdetr::st_header h = rfdetr::safetensors_parse("model.safetensors", file, file_size);
    uint64_t covered = 0;
    for (const auto & t : h.tensors) {
      if (t.end < t.begin || t.end > file_size - h.data_offset) __builtin_trap();
      covered += t.end - t.begin;
    }
    if (covered != file_size - h.data_offset) __builtin_trap();  // tensors tile the data section exactly
    rfdetr::checkpoint_check_tensors("model.safetensors", h);
  } catch (const rfdetr::error & e) {
    if (e.what()[0] == '\0') __builtin_trap();
  }
  std::memset(file + 8, 0, n);  // the next input's data section is zeros again
  return 0;
}
