// libFuzzer target: the shared-memory reference checks (server/shm.cpp shm_slots::resolve), which turn a
// client's image_shm {name, offset, length, width, height} into a pointer into this connection's slot mapping.
// Accepted references must be exactly what the pixels need: length = width*height*3 as a true (unwrapped)
// product, the range inside the slot file, the pointer inside the mapping. A rejection must say why.
#include "server/shm.h"

#include <fuzzer/FuzzedDataProvider.h>

#include <cstdint>
#include <cstdlib>
#include <string>
#include <unistd.h>

namespace {

rfdetr::shm_slots * slots() {
  static rfdetr::shm_slots * s = [] {
    std::string dir = "/dev/shm/rfdetr-fuzz-XXXXXX";
    if (mkdtemp(dir.data()) == nullptr) {
      dir = std::string(getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp") + "/rfdetr-fuzz-XXXXXX";
      if (mkdtemp(dir.data()) == nullptr) abort();
    }
    std::string err;
    auto        p = rfdetr::shm_slots::create(dir, 1, err).release();
    if (p == nullptr) abort();
    for (const auto & path : p->paths()) unlink(path.c_str());
    rmdir(dir.c_str());
    return p;
  }();
  return s;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t * data, size_t size) {
  rfdetr::shm_slots * s = slots();
  FuzzedDataProvider  in(data, size);
  const uint8_t       pick = in.ConsumeIntegral<uint8_t>();
  const uint64_t      offset = in.ConsumeIntegral<uint64_t>();
  const uint64_t      length = in.ConsumeIntegral<uint64_t>();
  const uint64_t      width  = in.ConsumeIntegral<uint64_t>();
  const uint64_t      height = in.ConsumeIntegral<uint64_t>();
  std::string         name;
  if (pick < 2 * rfdetr::k_shm_slots) {
    const std::string & path = s->paths()[pick % rfdetr::k_shm_slots];
    name                     = path.substr(path.rfind('/') + 1);
  } else {
    name = in.ConsumeRemainingBytesAsString();
  }
  const uint8_t *             p = nullptr;
  std::shared_ptr<const void> keep;
  const std::string           why = s->resolve(name, offset, length, width, height, p, keep);
  if (!why.empty()) {
    if (p != nullptr || keep) __builtin_trap();  // a rejection hands out nothing
    return 0;
  }
  const unsigned __int128 need = static_cast<unsigned __int128>(width) * height * 3;
  if (need != length) __builtin_trap();  // the pixels need more (or fewer) bytes than the range holds
  if (width < 1 || height < 1 || width > 8192 || height > 8192) __builtin_trap();  // no image of that size exists
  if (offset > rfdetr::k_shm_slot_bytes || length > rfdetr::k_shm_slot_bytes - offset) __builtin_trap();
  if (p == nullptr || !keep) __builtin_trap();
  return 0;
}
