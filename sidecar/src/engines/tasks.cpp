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

struct task_entry {
    const char * name;
    std::vector<output_spec> (*outputs)(const head_dims &);
};

const task_entry k_tasks[] = {
    {"detect", detect_outputs},
};

}  // namespace

size_t output_spec::count() const {
    size_t n = 1;
    for (uint64_t d : shape) {
        n *= static_cast<size_t>(d);
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
