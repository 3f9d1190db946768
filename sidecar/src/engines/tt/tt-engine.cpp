#include "engines/tt/tt-engine.h"

#include "engines/tt/tt-runner.h"
#include "model/checkpoint.h"

#include <cstdlib>
#include <vector>

#ifdef RFDETR_WITH_TTNN
#include "engines/tt/tt-ops-ttnn.h"
#endif

namespace rfdetr {

namespace tt {

namespace {

class tt_engine_impl : public engine {
  public:
    tt_engine_impl(std::string name, std::string precision, std::unique_ptr<tt_ops> ops, const checkpoint & ck,
                   bool eager)
        : name_(std::move(name)),
          precision_(std::move(precision)),
          variant_(ck.variant().variant),
          task_(ck.variant().arch.segment() ? "segment" : "detect"),
          labels_(ck.labels()),
          runner_(std::move(ops), ck, eager) {
        device_ = runner_.describe() + (runner_.eager() ? ", eager" : ", traced");
    }

    std::string                        name() const override { return name_; }
    std::string                        device() const override { return device_; }
    int                                num_queries() const override { return runner_.num_queries(); }
    int                                num_classes() const override { return runner_.num_classes(); }
    int                                input_size() const override { return runner_.input_size(); }
    std::string                        variant() const override { return variant_; }
    const std::vector<std::string> &   labels() const override { return labels_; }
    std::string                        task() const override { return task_; }
    std::string                        precision() const override { return precision_; }
    // Segment: the selection (out.rows(), from the replayed logits) decides which queries' masks the eager
    // mask matmul computes (tt_mask_head::masks); no rows, no mask work.
    void forward(const float * pixel_values, output_buffers & out) override {
        runner_.forward(pixel_values, out.at("logits"), out.at("pred_boxes"));
        if (runner_.has_masks()) {
            const std::vector<uint32_t> & rows = out.rows();
            if (!rows.empty()) {
                runner_.masks(std::vector<int>(rows.begin(), rows.end()), out.at("pred_masks"));
            }
        }
    }

  private:
    std::string              name_;
    std::string              precision_;
    std::string              variant_;
    std::string              task_;
    std::string              device_;
    std::vector<std::string> labels_;
    tt_runner                runner_;
};

}  // namespace
}  // namespace tt

std::unique_ptr<engine> tt_host_engine_create(const std::string & weights_dir, const engine_options & opts) {
    const std::string precision = opts.precision.empty() ? "fp32" : opts.precision;  // "": the default
    auto              ck        = checkpoint::open(weights_dir);
    auto              ops       = tt::tt_ops_host_create(precision, opts.threads);
    return std::make_unique<tt::tt_engine_impl>("tt-host", precision, std::move(ops), *ck, opts.eager);
}

const char * tt_engine_unbuilt_reason() {
#ifdef RFDETR_WITH_TTNN
    return nullptr;
#else
    return "engine 'tt': this rfdetr-sidecar was built without Tenstorrent support (RFDETR_WITH_TTNN=OFF). "
                "Rebuild against ttnn 0.78.0: RFDETR_CMAKE_ARGS='-DRFDETR_WITH_TTNN=ON' with RFDETR_TTNN_HEADERS and "
                "RFDETR_TTNN_WHEEL (scripts/fetch-ttnn-sdk.sh fetches both), or with TT_METAL_HOME set to a built "
                "tt-metal tree, then 'npm run build:sidecar' (SERVING.md, \"TT engine\"). "
                "To validate the TT graph without a card use --engine tt-host; use --engine cpu to serve on the CPU.";
#endif
}

std::unique_ptr<engine> tt_engine_create(const std::string & weights_dir, const engine_options & opts) {
#ifdef RFDETR_WITH_TTNN
    tt::tt_check_mesh_shape(std::getenv("TT_MESH_SHAPE"));
    // The card runs the device precision plan only (tt-graph.h, "device"): nothing else can be honoured.
    if (opts.precision != "bf16" && !opts.precision.empty()) {
        throw error("tt engine: the card runs the bf16 device precision plan only, but precision '" + opts.precision +
                    "' was asked; pass --precision bf16 (or none), or --engine tt-host --precision fp32 for fp32 on the host");
    }
    auto ck  = checkpoint::open(weights_dir);  // before opening the device: a bad checkpoint never claims the chip
    tt::tt_dims_of(ck->variant().arch);        // nor does a variant the graph does not build
    auto ops = tt::tt_ops_ttnn_open(opts.device_id);
    return std::make_unique<tt::tt_engine_impl>("tt", "bf16", std::move(ops), *ck, opts.eager);
#else
    (void)weights_dir;
    (void)opts;
    throw error(tt_engine_unbuilt_reason());
#endif
}

}  // namespace rfdetr
