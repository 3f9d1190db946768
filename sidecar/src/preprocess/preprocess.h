// The model's input transform: RGB u8 HWC (any size) -> pixel_values f32 CHW [3,S,S], bit-exact with the
// fixtures' recipe (shared/fixtures/rfdetr-synth/README.md "Preprocessing"): torch's antialiased bilinear
// resize on the float image, width pass first then the height pass on the f32 intermediate, each output an
// fmaf chain from 0 over its taps in ascending order; then (x*f32(1/255) - mean) / std as separate f32 ops.
// The result is never rounded to u8 (that moves values by up to 9e-3 and flips fixture detections).
#pragma once

#include "preprocess/axis-weights.h"
#include "preprocess/kernels.h"

#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace rfdetr {

// ImageNet mean/std as float32, as the reference holds them.
constexpr float k_imagenet_mean[3] = {0.485f, 0.456f, 0.406f};
constexpr float k_imagenet_std[3]  = {0.229f, 0.224f, 0.225f};

// The plain version of the recipe, for tests: scalar, allocates, no caching. `out` holds 3*S*S floats.
void preprocess_reference(const uint8_t * rgb, int width, int height, int out_size, float * out);

// The serving version: SIMD (runtime dispatch), axis tables cached per input size, scratch sized by the
// largest band seen and reused; no allocation per call once an image size has been seen. Not thread-safe
// (one per stage thread). An image of at least k_split_pixels has its output bands shared by the calling
// thread and one helper thread (started on first use, asleep between calls, kept off the caller's CPU), each
// claiming the next band:
// each output row is computed by the same kernels in the same order either way, so the bits do not depend
// on which thread computed it.
class preprocessor {
  public:
    // 4000x3000 -> 560: 17.6 ms on one Sapphire Rapids core, 8.1 ms with the helper on the second (idle) one.
    // 640x480 (0.3 MP, 0.75-1.1 ms on one Zen 4 core then) splits too: 0.56-0.62 ms with the helper when the
    // second core was free (bench/server/RESULTS.md section 6); below ~0.25 MP the helper's wake-up
    // (tens of us) would be a large part of the work. Re-measured in the server after the narrow width form
    // (640x480 JPEGs, test-sleep, quiet): 0.84-1.0 ms p50 without the split, 0.49-0.61 with it once the helper
    // is kept off the caller's CPU (sections 10, 12).
    static constexpr size_t k_split_pixels = 1u << 18;

    explicit preprocessor(int out_size, simd_level level = simd_level_best(), bool use_helper = true);
    ~preprocessor();
    preprocessor(const preprocessor &)             = delete;
    preprocessor & operator=(const preprocessor &) = delete;

    int        out_size() const { return out_size_; }
    simd_level level() const { return level_; }

    // rgb: width*height*3 bytes, RGB HWC row-major. out: 3*S*S floats CHW. Throws std::invalid_argument for
    // sizes outside 1..65535.
    void run(const uint8_t * rgb, int width, int height, float * out);

    // The CPUs the helper thread may run on (empty before its first use, or off Linux): those the caller may
    // use, but the one it was on at the last split (see keep_helper_off_this_cpu).
    std::vector<int> helper_cpus();

  private:
    struct scratch {
        std::vector<float>   band;        // 3 planes of the width-pass rows one band of output rows needs
        std::vector<uint8_t> transposed;  // width*3*16 bytes: 16 rows with lanes across rows
        std::vector<float>   planes;      // one image row as 3 f32 channel rows, for the narrow kernels
    };
    struct job;
    const width_plan &   width_for(int in_size);
    const axis_weights & height_for(int in_size);
    void                 bands(const job & jb, int band0, int band1, scratch & sc) const;
    void                 helper_main();
    void                 keep_helper_off_this_cpu();

    int                       out_size_;
    simd_level                level_;
    const kernel_table *      kernels_;
    std::vector<width_plan>   width_cache_;   // most recent last; a few entries
    std::vector<axis_weights> height_cache_;
    std::vector<uint8_t>      last_row_;  // the image's last row plus slack, so 4-byte gathers stay inside
    scratch                   scratch_[2];  // the caller's, the helper's

    const bool              use_helper_;
    std::thread             helper_;
    std::mutex              mu_;
    std::condition_variable cv_;
    std::function<void()>   task_;  // set by run(), cleared by the helper when done (or by run() if not taken)
    bool                    taken_ = false;  // the helper has started task_
    bool                    quit_  = false;
    int                     helper_off_cpu_ = -1;  // the CPU the helper was last kept off
    std::atomic<int>        next_band_{0};
};

}  // namespace rfdetr
