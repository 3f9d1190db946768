// The device lifecycle around the graph: open (the caller hands an opened tt_ops) -> upload -> eager warm
// run -> trace capture -> replay per request -> read back; close on any failure after open; release the
// trace and close on shutdown. Eager mode (no trace) re-issues the graph per request, for debugging.
#pragma once

#include "engines/tt/tt-graph.h"
#include "engines/tt/tt-ops.h"

#include <memory>
#include <string>
#include <vector>

namespace rfdetr {

class checkpoint;

namespace tt {

enum tt_runner_state {
    TT_RUNNER_STATE_READY,   // trace captured (or eager), serving
    TT_RUNNER_STATE_CLOSED,  // trace released, device closed
};

const char * tt_runner_state_str(tt_runner_state s);

class tt_runner {
  public:
    // Takes ownership of an opened device. On any failure the trace is released, the device closed, and the
    // error rethrown (a failed start must not keep the chip claimed).
    tt_runner(std::unique_ptr<tt_ops> ops, const checkpoint & ck, bool eager,
              const tt_plan & plan = tt_plan_named("device"));
    ~tt_runner();

    tt_runner(const tt_runner &)             = delete;
    tt_runner & operator=(const tt_runner &) = delete;

    // pixel_values [3,S,S] (S = input_size()) -> logits [Q*num_classes], pred_boxes [Q*4].
    void forward(const float * pixel_values, float * logits, float * pred_boxes);
    // RF-DETR Seg: pred_masks rows [rows.size(), M, M] of the last forward for these query indices (tt_mask_head::masks);
    // throws for a detection checkpoint.
    void masks(const std::vector<int> & rows, float * out);
    bool has_masks() const { return graph_ && graph_->mask_head(); }
    int  mask_side() const { return has_masks() ? graph_->mask_head()->mask_side() : 0; }
    // Reads a named intermediate of the last forward (see tt_graph::outputs::taps) as f32.
    std::vector<float> read_tap(const std::string & name, tt_shape * shape = nullptr);

    // Test hook (tt_graph::set_topk_override). Re-captures the trace when the override is switched on or off;
    // new indices for an override already in place are written into it, and the replay reads them.
    void set_topk_override(const std::vector<int> & indices);

    void            shutdown();  // release the trace, close the device; idempotent
    tt_runner_state state() const { return state_; }
    bool            eager() const { return eager_; }
    int             num_classes() const { return num_classes_; }
    int             num_queries() const { return graph_ ? graph_->num_queries() : 0; }
    int             input_size() const { return graph_ ? graph_->dims().input_size() : 0; }
    std::string     describe() const { return ops_->describe(); }

  private:
    void capture();

    std::unique_ptr<tt_ops>   ops_;
    std::unique_ptr<tt_graph> graph_;
    tt_graph::outputs         out_;
    std::vector<float>        im2col_;  // persistent host staging buffer [windows^2, window_seq, patch_k_pad]
    bool                      eager_;
    bool                      traced_ = false;
    int                       num_classes_ = 0;
    tt_runner_state           state_  = TT_RUNNER_STATE_CLOSED;
};

}  // namespace tt
}  // namespace rfdetr
