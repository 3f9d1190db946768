// The engine interface: one forward of the loaded RF-DETR variant, pixel_values in, the task's named head
// outputs out. Engines never postprocess: the TypeScript side owns it (chosen by the hello's task), so every
// engine is compared on its raw outputs and one postprocess serves them all. What the server needs to know
// about an engine before loading it (precisions, host cores) is in the registry (registry.h), not here.
#pragma once

#include "common/error.h"
#include "engines/outputs.h"

#include <memory>
#include <string>
#include <vector>

namespace rfdetr {

constexpr int k_input_channels = 3;
constexpr int k_num_queries    = 300;

struct engine_options {
    int         threads   = 0;   // 0 = physical cores
    int         device_id = 0;   // accelerator engines
    std::string precision;       // one of the engine's registry precisions; "" = its default (engine_create)
    bool        eager     = false;  // accelerator engines: no trace capture (debugging)
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
    // "large_deprecated", "seg-nano", ...): the hello's `variant`, by which a server that did not load the weights names the model.
    virtual std::string variant() const = 0;
    // Label per class index, from config.json id2label ("N/A" where absent).
    virtual const std::vector<std::string> & labels() const = 0;
    // The model's task, a row of the task table (outputs.h): "detect", or "segment" for RF-DETR Seg.
    virtual std::string task() const = 0;
    // The arithmetic this instance runs ("fp32", "bf16", "int8"): the hello's `precision`.
    virtual std::string precision() const = 0;

    // The head outputs forward() fills, in reply order: the task's (task_outputs).
    std::vector<output_spec> outputs() const {
        return task_outputs(task(), head_dims{num_queries(), num_classes(), input_size()});
    }

    // pixel_values: f32 [3,S,S] CHW, S = input_size(). Fills every output of outputs() in `out` (a set made from
    // outputs(), looked up by name); a selected output (segment's pred_masks) only for out.rows(), asked after
    // writing the logits, so the queries not selected cost nothing. Not thread-safe: one forward at a time.
    virtual void forward(const float * pixel_values, output_buffers & out) = 0;
};

// One forward with the check that it wrote every declared output (throws rfdetr::error naming the ones it did
// not): how the server runs an engine. `selection` is the request's (nullopt: a selected output carries no rows).
inline void engine_forward(engine & eng, const float * pixel_values, output_buffers & out,
                           std::optional<row_select> selection = std::nullopt) {
    out.begin_forward(std::move(selection));
    eng.forward(pixel_values, out);
    out.check_written(eng.name());
}

}  // namespace rfdetr
