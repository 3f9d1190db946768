// The serving preprocess: bands of output rows, each band's width-pass rows computed into a reused buffer,
// then the height pass and the normalisation per output row and channel.
#include "preprocess/preprocess.h"

#include <algorithm>
#include <cstring>
#include <stdexcept>
#include <string>

#ifdef __linux__
#include <pthread.h>
#include <sched.h>
#endif

namespace rfdetr {

namespace {

// Output rows per band. The width pass of the rows two bands share is done twice (about 2*support extra
// rows per band: ~6% at 3000 -> 560); in exchange the intermediate stays a few MB (at most ~3.3 MB for an
// 8192-row image) instead of height*S*3 floats (55 MB at 8192 rows).
constexpr int k_band_rows = 32;

constexpr size_t k_cache_sizes = 8;  // distinct input sizes kept per axis

constexpr int k_max_side = 65535;

}  // namespace

preprocessor::preprocessor(int out_size, simd_level level, bool use_helper)
    : out_size_(out_size), level_(level), kernels_(&kernels_for(level)), use_helper_(use_helper) {
    if (out_size <= 0 || out_size > k_max_side) {
        throw std::invalid_argument("preprocessor: output size " + std::to_string(out_size) + " is not in 1.." +
                                    std::to_string(k_max_side));
    }
}

preprocessor::~preprocessor() {
    if (helper_.joinable()) {
        {
            std::lock_guard<std::mutex> lock(mu_);
            quit_ = true;
        }
        cv_.notify_all();
        helper_.join();
    }
}

void preprocessor::helper_main() {
    std::unique_lock<std::mutex> lock(mu_);
    for (;;) {
        cv_.wait(lock, [this] { return quit_ || (task_ && !taken_); });
        if (quit_) {
            return;
        }
        taken_ = true;
        lock.unlock();
        task_();
        lock.lock();
        task_ = nullptr;
        cv_.notify_all();
    }
}

// Woken by the caller, a sleeping helper is often placed on the caller's own CPU (the scheduler's wake-affine
// choice when the other one was busy at some recent tick) and preempts it there: the two then take turns on one
// CPU and the split buys nothing. In the server (640x480 JPEGs, test-sleep engine) that was 52 of 99 calls, each
// as slow as one thread (bench/server/RESULTS.md section 11). So before each wake the helper may run on any CPU
// the caller may, except the one the caller is on now; with one such CPU the helper's mask is left as it is.
void preprocessor::keep_helper_off_this_cpu() {
#ifdef __linux__
    const int cpu = sched_getcpu();
    if (cpu < 0 || cpu == helper_off_cpu_) {
        return;
    }
    helper_off_cpu_ = cpu;
    cpu_set_t allowed;
    CPU_ZERO(&allowed);
    if (sched_getaffinity(0, sizeof allowed, &allowed) != 0) {
        return;
    }
    CPU_CLR(cpu, &allowed);
    if (CPU_COUNT(&allowed) > 0) {
        pthread_setaffinity_np(helper_.native_handle(), sizeof allowed, &allowed);
    }
#endif
}

std::vector<int> preprocessor::helper_cpus() {
    std::vector<int> out;
#ifdef __linux__
    std::lock_guard<std::mutex> lock(mu_);
    cpu_set_t                   set;
    CPU_ZERO(&set);
    if (helper_.joinable() && pthread_getaffinity_np(helper_.native_handle(), sizeof set, &set) == 0) {
        for (int c = 0; c < CPU_SETSIZE; c++) {
            if (CPU_ISSET(c, &set)) {
                out.push_back(c);
            }
        }
    }
#endif
    return out;
}

const width_plan & preprocessor::width_for(int in_size) {
    for (auto & p : width_cache_) {
        if (p.in_size == in_size) {
            return p;
        }
    }
    if (width_cache_.size() >= k_cache_sizes) {
        width_cache_.erase(width_cache_.begin());
    }
    width_cache_.push_back(width_plan_make(axis_weights_compute(in_size, out_size_)));
    return width_cache_.back();
}

const axis_weights & preprocessor::height_for(int in_size) {
    for (auto & a : height_cache_) {
        if (a.in_size == in_size) {
            return a;
        }
    }
    if (height_cache_.size() >= k_cache_sizes) {
        height_cache_.erase(height_cache_.begin());
    }
    height_cache_.push_back(axis_weights_compute(in_size, out_size_));
    return height_cache_.back();
}

struct preprocessor::job {
    const uint8_t *      rgb;
    int                  height;
    const width_plan &   wp;
    const axis_weights & hy;
    size_t               stride;
    size_t               row_bytes;
    bool                 by16;
    bool                 narrow;
    float *              out;
};

void preprocessor::run(const uint8_t * rgb, int width, int height, float * out) {
    if (width <= 0 || height <= 0 || width > k_max_side || height > k_max_side) {
        throw std::invalid_argument("preprocessor: image " + std::to_string(width) + "x" + std::to_string(height) +
                                    " is outside 1..65535 on a side");
    }
    const width_plan &   wp     = width_for(width);
    const axis_weights & hy     = height_for(height);
    const int            s      = out_size_;
    const size_t         stride = static_cast<size_t>(wp.out_padded);

    // Narrow scales take the level's permute kernel where it has one. Kernels with lanes across rows write
    // rows in groups of 16: a band's planes are rounded up to that.
    const bool narrow   = wp.narrow && kernels_->width_row_narrow != nullptr;
    const bool by16     = !narrow && kernels_->width_rows16 != nullptr;
    const auto rounded  = [by16](size_t rows) { return by16 ? (rows + 15) / 16 * 16 : rows; };
    size_t     max_rows = 0;
    for (int oy0 = 0; oy0 < s; oy0 += k_band_rows) {
        const int oy1 = std::min(s, oy0 + k_band_rows);
        max_rows = std::max<size_t>(max_rows, static_cast<size_t>(hy.start[oy1 - 1] + hy.count[oy1 - 1] - hy.start[oy0]));
    }
    const int  n_bands = (s + k_band_rows - 1) / k_band_rows;
    const bool split   = use_helper_ && n_bands >= 2 && static_cast<size_t>(width) * height >= k_split_pixels;
    for (int w = 0; w < (split ? 2 : 1); w++) {
        scratch & sc = scratch_[w];
        if (sc.band.size() < 3 * rounded(max_rows) * stride) {
            sc.band.resize(3 * rounded(max_rows) * stride);
        }
        if (by16 && sc.transposed.size() < static_cast<size_t>(width) * 3 * 16) {
            sc.transposed.resize(static_cast<size_t>(width) * 3 * 16);
        }
        if (narrow && sc.planes.size() < 3 * narrow_plane_floats(wp)) {
            sc.planes.resize(3 * narrow_plane_floats(wp));
        }
    }
    // The gather kernels read a 4-byte word at each pixel; only the image's last pixel has no byte after it.
    const size_t row_bytes = static_cast<size_t>(width) * 3;
    if (!by16 && !narrow) {
        if (last_row_.size() < row_bytes + 4) {
            last_row_.assign(row_bytes + 4, 0);
        }
        std::memcpy(last_row_.data(), rgb + (static_cast<size_t>(height) - 1) * row_bytes, row_bytes);
    }
    const job jb{rgb, height, wp, hy, stride, row_bytes, by16, narrow, out};
    if (!split) {
        bands(jb, 0, n_bands, scratch_[0]);
        return;
    }
    // Both threads claim bands one at a time, so a helper the scheduler runs late (a busy host) delays
    // nothing: the caller takes what is left, and cancels the task if the helper never picked it up.
    next_band_.store(0);
    const auto claim_loop = [this, &jb, n_bands](scratch & sc) {
        for (int b = next_band_.fetch_add(1); b < n_bands; b = next_band_.fetch_add(1)) {
            bands(jb, b, b + 1, sc);
        }
    };
    {
        std::lock_guard<std::mutex> lock(mu_);
        if (!helper_.joinable()) {
            helper_ = std::thread([this] { helper_main(); });
        }
        keep_helper_off_this_cpu();
        taken_ = false;
        task_  = [&claim_loop, this] { claim_loop(scratch_[1]); };
    }
    cv_.notify_all();
    claim_loop(scratch_[0]);
    std::unique_lock<std::mutex> lock(mu_);
    if (!taken_) {
        task_ = nullptr;
        return;
    }
    cv_.wait(lock, [this] { return !task_; });
}

void preprocessor::bands(const job & jb, int band0, int band1, scratch & sc) const {
    const int            s      = out_size_;
    const axis_weights & hy     = jb.hy;
    const size_t         stride = jb.stride;
    const bool           by16   = jb.by16;
    const auto           rounded = [by16](size_t rows) { return by16 ? (rows + 15) / 16 * 16 : rows; };
    const size_t         plane_out = static_cast<size_t>(s) * s;
    for (int b = band0; b < band1; b++) {
        const int    oy0   = b * k_band_rows;
        const int    oy1   = std::min(s, oy0 + k_band_rows);
        const int    r0    = hy.start[oy0];
        const int    r1    = hy.start[oy1 - 1] + hy.count[oy1 - 1];
        const size_t plane = rounded(static_cast<size_t>(r1 - r0)) * stride;
        float *      band  = sc.band.data();
        for (int y = r0; y < r1; y += by16 ? 16 : 1) {
            const size_t o = static_cast<size_t>(y - r0) * stride;
            if (by16) {
                const uint8_t * rows[16];
                for (int k = 0; k < 16; k++) {  // past the band's last row: repeats of it, written to padding
                    rows[k] = jb.rgb + static_cast<size_t>(std::min(y + k, r1 - 1)) * jb.row_bytes;
                }
                kernels_->width_rows16(jb.wp, rows, jb.row_bytes, sc.transposed.data(), band + o, band + plane + o,
                                       band + 2 * plane + o, stride);
                continue;
            }
            if (jb.narrow) {
                kernels_->width_row_narrow(jb.wp, jb.rgb + static_cast<size_t>(y) * jb.row_bytes, jb.row_bytes,
                                           sc.planes.data(), band + o, band + plane + o, band + 2 * plane + o);
                continue;
            }
            const uint8_t * row =
                y == jb.height - 1 ? last_row_.data() : jb.rgb + static_cast<size_t>(y) * jb.row_bytes;
            kernels_->width_row(jb.wp, row, band + o, band + plane + o, band + 2 * plane + o);
        }
        for (int oy = oy0; oy < oy1; oy++) {
            const float * w     = hy.weights.data() + static_cast<size_t>(oy) * hy.max_taps;
            const size_t  first = static_cast<size_t>(hy.start[oy] - r0) * stride;
            for (int c = 0; c < 3; c++) {
                kernels_->height_row(band + c * plane + first, stride, hy.count[oy], w, s, k_imagenet_mean[c],
                                     k_imagenet_std[c], jb.out + c * plane_out + static_cast<size_t>(oy) * s);
            }
        }
    }
}

}  // namespace rfdetr
