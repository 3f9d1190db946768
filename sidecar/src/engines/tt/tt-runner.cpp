#include "engines/tt/tt-runner.h"

#include "engines/engine.h"
#include "engines/tt/tt-engine.h"
#include "engines/tt/tt-prep.h"

#include <cstdio>

namespace rfdetr {
namespace tt {

void tt_check_mesh_shape(const char * value) {
    if (value == nullptr || value[0] == '\0' || std::string(value) == "1x1") {
        return;
    }
    throw error(std::string("tt engine: TT_MESH_SHAPE=") + value +
                " is not supported; expected 1x1 (unset). This engine runs RF-DETR-base at batch 1 on one chip and "
                "does not shard across a mesh; run one sidecar per device with TT_DEVICE_ID or TT_METAL_VISIBLE_DEVICES instead");
}

const char * tt_runner_state_str(tt_runner_state s) {
    switch (s) {
        case TT_RUNNER_STATE_READY:
            return "ready";
        case TT_RUNNER_STATE_CLOSED:
            return "closed";
    }
    return "unknown";
}

tt_runner::tt_runner(std::unique_ptr<tt_ops> ops, const checkpoint & ck, bool eager, const tt_plan & plan)
    : ops_(std::move(ops)), eager_(eager) {
    try {
        graph_       = std::make_unique<tt_graph>(*ops_, ck, plan);
        num_classes_ = graph_->num_classes();
        im2col_.assign((size_t)graph_->dims().tokens * graph_->dims().patch_k_pad, 0.0f);
        // Warm run, eager: compiles every program (device) and proves the graph end to end before capture.
        ops_->write(graph_->input(), im2col_.data());
        out_ = graph_->build();
        ops_->synchronize();
        if (!eager_) {
            capture();
        }
        state_ = TT_RUNNER_STATE_READY;
    } catch (...) {
        std::fprintf(stderr, "tt_runner: start failed; releasing the trace and closing the device\n");
        shutdown();
        throw;
    }
}

tt_runner::~tt_runner() {
    shutdown();
}

void tt_runner::capture() {
    if (traced_) {
        ops_->release_trace();
        traced_ = false;
    }
    ops_->begin_trace_capture();
    try {
        out_ = graph_->build();
    } catch (...) {
        ops_->end_trace_capture();
        throw;
    }
    ops_->end_trace_capture();
    traced_ = true;
    ops_->synchronize();
}

void tt_runner::forward(const float * pixel_values, float * logits, float * pred_boxes) {
    if (state_ != TT_RUNNER_STATE_READY) {
        throw error(std::string("tt_runner::forward: the engine is ") + tt_runner_state_str(state_) +
                    "; it cannot run a forward after shutdown");
    }
    tt_im2col(graph_->dims(), pixel_values, im2col_.data());
    ops_->write(graph_->input(), im2col_.data());
    if (eager_) {
        out_ = graph_->build();
    } else {
        ops_->execute_trace();
    }
    ops_->read(out_.logits, logits);
    ops_->read(out_.pred_boxes, pred_boxes);
}

void tt_runner::masks(const std::vector<int> & rows, float * out) {
    if (state_ != TT_RUNNER_STATE_READY) {
        throw error(std::string("tt_runner::masks: the engine is ") + tt_runner_state_str(state_) + "; run a forward first");
    }
    if (!has_masks()) {
        throw error("tt_runner::masks: the loaded checkpoint has no segmentation head (a detection variant); it has no masks");
    }
    graph_->mask_head()->masks(rows, out);
}

std::vector<float> tt_runner::read_tap(const std::string & name, tt_shape * shape) {
    auto it = out_.taps.find(name);
    if (it == out_.taps.end()) {
        throw error("tt_runner::read_tap: no intermediate named '" + name + "'");
    }
    std::vector<float> v(tt_numel(it->second->shape));
    ops_->read(it->second, v.data());
    if (shape) {
        *shape = it->second->shape;
    }
    return v;
}

void tt_runner::set_topk_override(const std::vector<int> & indices) {
    if (state_ != TT_RUNNER_STATE_READY) {
        throw error("tt_runner::set_topk_override: the engine is closed");
    }
    bool changes_graph = graph_->set_topk_override(indices);
    if (changes_graph && !eager_) {
        capture();
    }
}

void tt_runner::shutdown() {
    if (!ops_) {
        return;
    }
    if (traced_) {
        try {
            ops_->release_trace();
        } catch (const std::exception & e) {
            std::fprintf(stderr, "tt_runner::shutdown: release_trace failed: %s\n", e.what());
        }
        traced_ = false;
    }
    out_ = {};
    graph_.reset();
    try {
        ops_->close();
    } catch (const std::exception & e) {
        std::fprintf(stderr, "tt_runner::shutdown: close failed: %s\n", e.what());
    }
    state_ = TT_RUNNER_STATE_CLOSED;
}

}  // namespace tt
}  // namespace rfdetr
