// Request payload buffers, and a small pool that reuses the big ones. A fresh 36 MB buffer (a 4000x3000 RGB
// frame) cost 45-60 ms of page faults on the first write on this VM against 1.5 ms to write it again, so
// the buffers of image frames are kept for the next frame instead of being returned to the kernel.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

namespace rfdetr {

// A frame's payload, not zero-filled on allocation (a declared 200 MB frame costs no memory until its
// bytes arrive). `size` bytes are the payload; `capacity` is what the allocation holds.
struct frame_bytes {
    std::unique_ptr<uint8_t[]> data;
    size_t                     size     = 0;
    size_t                     capacity = 0;
};

class frame_pool {
  public:
    // Buffers of at least `min_bytes` are kept, up to `keep_bytes` in all; smaller ones are freed.
    frame_pool(size_t min_bytes, size_t keep_bytes) : min_bytes_(min_bytes), keep_bytes_(keep_bytes) {}

    // A buffer for `size` bytes: the smallest kept one that fits, else a new allocation (may throw bad_alloc).
    frame_bytes take(size_t size);

    // Returns a buffer; kept while the total stays within keep_bytes (the largest kept go first).
    void give(frame_bytes b);

    size_t kept_bytes();

  private:
    std::mutex               mu_;
    std::vector<frame_bytes> kept_;
    size_t                   kept_total_ = 0;
    const size_t             min_bytes_;
    const size_t             keep_bytes_;
};

}  // namespace rfdetr
