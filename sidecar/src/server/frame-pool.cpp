#include "server/frame-pool.h"

#include <algorithm>

namespace rfdetr {

frame_bytes frame_pool::take(size_t size) {
    if (size >= min_bytes_) {
        std::lock_guard<std::mutex> lock(mu_);
        auto                        best = kept_.end();
        for (auto it = kept_.begin(); it != kept_.end(); ++it) {
            if (it->capacity >= size && (best == kept_.end() || it->capacity < best->capacity)) {
                best = it;
            }
        }
        if (best != kept_.end()) {
            frame_bytes b = std::move(*best);
            kept_.erase(best);
            kept_total_ -= b.capacity;
            b.size = size;
            return b;
        }
    }
    frame_bytes b;
    b.data.reset(new uint8_t[size]);
    b.size     = size;
    b.capacity = size;
    return b;
}

void frame_pool::give(frame_bytes b) {
    if (!b.data || b.capacity < min_bytes_ || b.capacity > keep_bytes_) {
        return;  // freed here
    }
    std::vector<frame_bytes> dropped;  // freed outside the lock
    {
        std::lock_guard<std::mutex> lock(mu_);
        kept_total_ += b.capacity;
        kept_.push_back(std::move(b));
        while (kept_total_ > keep_bytes_) {
            auto largest = std::max_element(kept_.begin(), kept_.end(), [](const frame_bytes & x, const frame_bytes & y) {
                return x.capacity < y.capacity;
            });
            kept_total_ -= largest->capacity;
            dropped.push_back(std::move(*largest));
            kept_.erase(largest);
        }
    }
}

size_t frame_pool::kept_bytes() {
    std::lock_guard<std::mutex> lock(mu_);
    return kept_total_;
}

}  // namespace rfdetr
