#include "engines/cpu/cpu-engine.h"

#include "engines/cpu/cpu-model.h"
#include "engines/cpu/qgemm.h"
#include "model/checkpoint.h"

#include <cstdlib>
#include <cstring>
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

// RFDETR_CPU_ISA caps the kernels' instruction set below what the CPU has (benchmarks of an AVX2-only
// machine on a newer one): avx2 (float AVX2, int8 vpmaddubsw), avxvnni (float AVX2, int8 AVX-VNNI),
// avx512 (float AVX-512, int8 AVX-512 VNNI). Unset: the best this CPU runs.
void apply_isa_cap() {
    const char * cap = std::getenv("RFDETR_CPU_ISA");
    if (cap == nullptr || *cap == '\0') return;
    struct level {
        const char *name, *f32, *i8;
    };
    static const level levels[] = {{"avx2", "avx2", "avx2"}, {"avxvnni", "avx2", "avxvnni"}, {"avx512", "avx512", "avx512vnni"}};
    for (const level & l : levels) {
        if (std::strcmp(cap, l.name) != 0) continue;
        if (!cpu::gemm_select_isa(l.f32) || !cpu::qgemm_select_isa(l.i8)) {
            throw error(std::string("RFDETR_CPU_ISA=") + cap + ": this CPU lacks the " + l.name +
                        " kernels; unset it or pick a lower level (avx2, avxvnni, avx512)");
        }
        return;
    }
    throw error(std::string("RFDETR_CPU_ISA='") + cap + "' is not a kernel level; expected avx2, avxvnni or avx512 (or unset)");
}

class cpu_engine final : public engine {
  public:
    cpu_engine(std::unique_ptr<checkpoint> ckpt, int threads, bool int8)
        : ckpt_(std::move(ckpt)), model_(*ckpt_, threads, int8) {
        device_ = cpu_model_name() + " (" + std::to_string(model_.threads()) + " thread" +
                  (model_.threads() == 1 ? "" : "s") + ", " + cpu::gemm_isa() + " kernels" +
                  (int8 ? std::string(", int8 ") + cpu::qgemm_isa() : std::string()) + ")";
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
    if (opts.precision != "fp32" && opts.precision != "int8") {
        throw error("cpu_engine_create: precision '" + opts.precision +
                    "' is not supported by the cpu engine; expected fp32 or int8");
    }
    apply_isa_cap();
    const int threads = opts.threads == 0 ? physical_core_count() : opts.threads;
    auto ckpt = checkpoint::open(weights_dir);
    return std::make_unique<cpu_engine>(std::move(ckpt), threads, opts.precision == "int8");
}

}  // namespace rfdetr
