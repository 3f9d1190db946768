// An engine's head outputs by name: what each task's head produces (the task table, tasks.cpp) and the
// buffers one forward fills (outputs.cpp). Outputs are f32, row-major; the hello declares them and every infer
// reply carries them in this order (sidecar/PROTOCOL.md, "hello fields"). A selected output (RF-DETR Seg's mask
// logits) carries only the rows of the queries the request's selection picks (row-select.h), so the engine
// computes and the reply copies those rows alone.
#pragma once

#include "engines/row-select.h"

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace rfdetr {

struct output_spec {
    std::string           name;   // "logits", "pred_boxes", ...
    std::vector<uint64_t> shape;  // f32 elements per axis; for a selected output, shape[0] is the row bound
    bool                  selected = false;  // the reply carries a subset of the rows along axis 0 (hello `rows`)
    size_t                count() const;      // product(shape)
    size_t                row_count() const;  // product(shape[1:]): the floats of one row
};

// What a head's output shapes are computed from.
struct head_dims {
    int num_queries = 0;
    int num_classes = 0;
    int input_size  = 0;  // S of pixel_values [3,S,S]
};

// The tasks an engine can declare, in table order ("detect", "segment").
std::vector<std::string> task_names();

// The outputs of `task`'s head, in reply order. Throws rfdetr::error for a task the table lacks, naming the
// tasks it has.
std::vector<output_spec> task_outputs(const std::string & task, const head_dims & dims);

// One f32 buffer per output (the pipeline keeps one set for every forward). A selected output's buffer holds
// exactly the rows of rows(), in that order; the others hold product(shape) floats.
class output_buffers {
  public:
    // Throws rfdetr::error when a selected output has no "logits" [Q, C] output to select its rows from.
    explicit output_buffers(std::vector<output_spec> specs);

    const std::vector<output_spec> & specs() const { return specs_; }
    bool has_selected() const { return selected_ >= 0; }
    // The buffer of output `name`, for the engine to fill; marks it written. For a selected output it holds
    // rows().size() rows (the rows are computed first, from the written logits). Throws rfdetr::error when
    // this set has no output of that name (an engine writing an output its task does not declare).
    float * at(const std::string & name);
    const std::vector<float> & values(size_t i) const { return values_[i]; }

    // The queries whose rows the selected outputs carry this forward, in row order: select_rows() over the
    // "logits" buffer with the forward's selection, computed once (none: no rows). An engine asks after
    // writing the logits and before computing a selected output; throws rfdetr::error when the logits are not
    // written yet or the task has no selected output.
    const std::vector<uint32_t> & rows();

    // Around one forward: take the request's selection (nullopt: selected outputs carry 0 rows) and forget
    // which outputs were written and the last rows; then throw rfdetr::error naming `engine` and every
    // declared output its forward did not ask for (a task row added without the engine's compute would
    // otherwise send the last request's values, or zeros). A selected output with 0 rows needs no write.
    void begin_forward(std::optional<row_select> selection = std::nullopt);
    void check_written(const std::string & engine);

  private:
    std::vector<output_spec>        specs_;
    std::vector<std::vector<float>> values_;
    std::vector<bool>               written_;
    int                             logits_   = -1;  // index of "logits"
    int                             selected_ = -1;  // index of the first selected output
    std::optional<row_select>       selection_;
    bool                            rows_ready_ = false;
    std::vector<uint32_t>           rows_;
};

}  // namespace rfdetr
