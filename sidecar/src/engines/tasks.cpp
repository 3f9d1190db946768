// The task table: per task, the outputs its head produces, in the order the hello declares them and every
// infer reply carries them. A task with another output (RF-DETR Seg's mask logits) is one more row here plus
// the engine's compute that fills it; the server, the protocol codec and the client read the list.
#include "engines/outputs.h"

#include "common/error.h"

namespace rfdetr {

namespace {

std::vector<output_spec> detect_outputs(const head_dims & d) {
    const auto q = static_cast<uint64_t>(d.num_queries);
    return {
        {"logits", {q, static_cast<uint64_t>(d.num_classes)}},  // pre-sigmoid class scores
        {"pred_boxes", {q, 4}},                                 // normalised cxcywh, unclamped
    };
}

// RF-DETR Seg: the detect outputs plus the mask logits, one M x M map per query at a quarter of the input side
// (the mask head runs at stride 4), carried only for the selected queries (row-select.h).
std::vector<output_spec> segment_outputs(const head_dims & d) {
    auto       o = detect_outputs(d);
    const auto m = static_cast<uint64_t>(d.input_size / 4);
    o.push_back({"pred_masks", {static_cast<uint64_t>(d.num_queries), m, m}, true});  // pre-threshold mask logits
    return o;
}

struct task_entry {
    const char * name;
    std::vector<output_spec> (*outputs)(const head_dims &);
};

const task_entry k_tasks[] = {
    {"detect", detect_outputs},
    {"segment", segment_outputs},
};

}  // namespace

size_t output_spec::count() const {
    size_t n = 1;
    for (uint64_t d : shape) {
        n *= static_cast<size_t>(d);
    }
    return n;
}

size_t output_spec::row_count() const {
    size_t n = 1;
    for (size_t i = 1; i < shape.size(); i++) {
        n *= static_cast<size_t>(shape[i]);
    }
    return n;
}

std::vector<std::string> task_names() {
    std::vector<std::string> names;
    for (const auto & t : k_tasks) {
        names.emplace_back(t.name);
    }
    return names;
}

std::vector<output_spec> task_outputs(const std::string & task, const head_dims & dims) {
    for (const auto & t : k_tasks) {
        if (task == t.name) {
            return t.outputs(dims);
        }
    }
    std::string known;
    for (const auto & n : task_names()) {
        known += (known.empty() ? "" : ", ") + n;
    }
    throw error("task_outputs: unknown task '" + task + "'; the task table has " + known);
}

}  // namespace rfdetr
