// An engine's head outputs by name: what each task's head produces (the task table, tasks.cpp) and the
// persistent buffers one forward fills (outputs.cpp). Outputs are f32, row-major; the hello declares them and
// every infer reply carries them in this order (sidecar/PROTOCOL.md, "hello fields").
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace rfdetr {

struct output_spec {
    std::string           name;   // "logits", "pred_boxes", ...
    std::vector<uint64_t> shape;  // f32 elements per axis
    size_t                count() const;  // product(shape)
};

// What a head's output shapes are computed from.
struct head_dims {
    int num_queries = 0;
    int num_classes = 0;
    int input_size  = 0;  // S of pixel_values [3,S,S]
};

// The tasks an engine can declare, in table order ("detect").
std::vector<std::string> task_names();

// The outputs of `task`'s head, in reply order. Throws rfdetr::error for a task the table lacks, naming the
// tasks it has.
std::vector<output_spec> task_outputs(const std::string & task, const head_dims & dims);

// One f32 buffer per output, allocated once (the pipeline keeps one set for every forward).
class output_buffers {
  public:
    explicit output_buffers(std::vector<output_spec> specs);

    const std::vector<output_spec> & specs() const { return specs_; }
    // The buffer of output `name` (specs' count floats), for the engine to fill; marks it written. Throws
    // rfdetr::error when this set has no output of that name (an engine writing an output its task does not
    // declare).
    float * at(const std::string & name);
    const std::vector<float> & values(size_t i) const { return values_[i]; }

    // Around one forward: forget which outputs were written, then throw rfdetr::error naming `engine` and
    // every declared output its forward did not ask for (a task row added without the engine's compute would
    // otherwise send the last request's values, or zeros).
    void begin_forward();
    void check_written(const std::string & engine) const;

  private:
    std::vector<output_spec>        specs_;
    std::vector<std::vector<float>> values_;
    std::vector<bool>               written_;
};

}  // namespace rfdetr
