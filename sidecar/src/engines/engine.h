// The engine interface: one forward of the loaded RF-DETR variant, pixel_values in, raw head outputs out.
// Engines never postprocess: the TypeScript side owns it (src/detect/postprocess.ts), so every engine is compared on
// its raw outputs and one postprocess serves them all.
#pragma once

#include "common/error.h"

#include <memory>
#include <string>
#include <vector>

namespace rfdetr {

constexpr int k_input_channels = 3;
constexpr int k_num_queries    = 300;

struct engine_options {
    int         threads   = 0;       // 0 = physical cores
    int         device_id = 0;       // accelerator engines
    std::string precision = "fp32";  // fp32 | bf16 (tt-host) | int8 (cpu)
    bool        eager     = false;   // accelerator engines: no trace capture (debugging)
};

class engine {
  public:
    virtual ~engine() = default;

    virtual std::string name() const   = 0;  // "cpu", "tt", "tt-host", ...
    virtual std::string device() const = 0;  // human description, e.g. "Intel Xeon Platinum 8480+ (2 threads, avx512 kernels)"
    virtual int num_queries() const    = 0;  // 300
    virtual int num_classes() const    = 0;  // from the checkpoint (class_embed rows)
    virtual int input_size() const     = 0;  // S of pixel_values [3,S,S]: the variant's resolution (Base 560)
    // The loaded checkpoint's variant as its schema names it ("base", "nano", "small", "medium", "large",
    // "large_deprecated"): the hello's `variant`, by which a server that did not load the weights names the model.
    virtual std::string variant() const = 0;
    // Label per class index, from config.json id2label ("N/A" where absent).
    virtual const std::vector<std::string> & labels() const = 0;

    // pixel_values: f32 [3,S,S] CHW, S = input_size(). logits: f32 [num_queries*num_classes] (pre-sigmoid).
    // pred_boxes: f32 [num_queries*4] normalised cxcywh, unclamped. Not thread-safe: one forward at a time.
    virtual void forward(const float * pixel_values, float * logits, float * pred_boxes) = 0;

    // True when forward() computes on this machine's cores. The server then preprocesses each request on the
    // forward thread just before its forward (a concurrent resize would compete with the engine's threads);
    // false (an accelerator) lets it resize request N+1 while request N is on the device.
    virtual bool forward_uses_host_cores() const = 0;
};

// Creates and loads an engine from a weights directory (model.safetensors + config.json).
// Throws rfdetr::error naming the engine, the file and the fix. Never falls back to another engine.
std::unique_ptr<engine> engine_create(const std::string & name, const std::string & weights_dir,
                                      const engine_options & opts);

// The engines this binary can run, in preference order.
std::vector<std::string> engine_names();

// The engines this project knows that this build lacks (each has an engine_unbuilt_reason).
std::vector<std::string> engine_unbuilt_names();

// For an engine this project knows but this build lacks (e.g. `tt` without RFDETR_WITH_TTNN): why, and how
// to build it. Empty for engines that are built and for names nobody knows.
std::string engine_unbuilt_reason(const std::string & name);

}  // namespace rfdetr
