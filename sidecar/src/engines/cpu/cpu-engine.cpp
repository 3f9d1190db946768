#include "engines/cpu/cpu-engine.h"

#include "engines/cpu/cpu-model.h"
#include "model/checkpoint.h"

#include <fstream>
#include <string>

namespace rfdetr {

namespace {

std::string cpu_model_name() {
    std::ifstream in("/proc/cpuinfo");
    std::string   line;
    while (std::getline(in, line)) {
        if (line.rfind("model name", 0) == 0) {
            const auto colon = line.find(':');
            if (colon != std::string::npos) {
                return line.substr(line.find_first_not_of(' ', colon + 1));
            }
        }
    }
    return "x86-64 CPU";
}

class cpu_engine final : public engine {
  public:
    cpu_engine(std::unique_ptr<checkpoint> ckpt, int threads)
        : ckpt_(std::move(ckpt)), model_(*ckpt_, threads) {
        device_ = cpu_model_name() + " (" + std::to_string(model_.threads()) + " thread" +
                  (model_.threads() == 1 ? "" : "s") + ", " + cpu::gemm_isa() + " kernels)";
    }

    std::string name() const override { return "cpu"; }
    std::string device() const override { return device_; }
    int num_queries() const override { return k_num_queries; }
    int num_classes() const override { return model_.num_classes(); }
    int input_size() const override { return ckpt_->variant().arch.resolution; }
    const std::vector<std::string> & labels() const override { return ckpt_->labels(); }
    bool forward_uses_host_cores() const override { return true; }
    void forward(const float * pixel_values, float * logits, float * pred_boxes) override {
        model_.forward(pixel_values, logits, pred_boxes);
    }

  private:
    std::unique_ptr<checkpoint> ckpt_;
    cpu::model                  model_;
    std::string                 device_;
};

}  // namespace

std::unique_ptr<engine> cpu_engine_create(const std::string & weights_dir, const engine_options & opts) {
    if (opts.threads < 0) {
        throw error("cpu_engine_create: threads must be 0 (physical cores) or a positive count, got " +
                    std::to_string(opts.threads));
    }
    if (opts.precision != "fp32") {
        throw error("cpu_engine_create: precision '" + opts.precision +
                    "' is not supported by the cpu engine; expected fp32");
    }
    const int threads = opts.threads == 0 ? physical_core_count() : opts.threads;
    auto ckpt = checkpoint::open(weights_dir);
    return std::make_unique<cpu_engine>(std::move(ckpt), threads);
}

}  // namespace rfdetr
