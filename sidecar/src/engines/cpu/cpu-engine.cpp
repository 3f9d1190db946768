#include "engines/cpu/cpu-engine.h"

#include "engines/cpu/bgemm.h"
#include "engines/cpu/cpu-model.h"
#include "engines/cpu/isa-level.h"
#include "engines/cpu/qgemm.h"
#include "model/checkpoint.h"

#include <cstdlib>
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

// RFDETR_CPU_ISA caps the kernels' instruction set below what the CPU has (benchmarks of an older machine
// on a newer one; isa-level.h lists the levels). Unset: the best this CPU runs.
void apply_isa_cap() {
    const char * cap = std::getenv("RFDETR_CPU_ISA");
    if (cap == nullptr || *cap == '\0') return;
    if (const std::string err = cpu::select_isa_level(cap); !err.empty()) throw error(err);
}

class cpu_engine final : public engine {
  public:
    cpu_engine(std::unique_ptr<checkpoint> ckpt, int threads, cpu::precision p)
        : ckpt_(std::move(ckpt)), model_(*ckpt_, threads, p) {
        const bool int8 = p == cpu::precision::int8;
        device_ = cpu_model_name() + " (" + std::to_string(model_.threads()) + " thread" +
                  (model_.threads() == 1 ? "" : "s") + ", " + cpu::gemm_isa() + " kernels" +
                  (int8 ? std::string(", int8 ") + cpu::qgemm_isa() : std::string()) +
                  (model_.int8_attention() ? std::string(" with int8 attention") : std::string()) +
                  (p == cpu::precision::bf16 ? std::string(", bf16 ") + cpu::bgemm_isa() : std::string()) + ")";
        // A CPU with AMX whose OS refused the tile state runs int8 on VNNI: the device line (logged at start,
        // shown by /info) says why.
        if (int8 && !cpu::qgemm_amx_note().empty()) device_ += "; " + cpu::qgemm_amx_note();
    }

    std::string name() const override { return "cpu"; }
    std::string device() const override { return device_; }
    int num_queries() const override { return model_.dims().queries; }
    int num_classes() const override { return model_.num_classes(); }
    int input_size() const override { return ckpt_->variant().arch.resolution; }
    std::string variant() const override { return ckpt_->variant().variant; }
    const std::vector<std::string> & labels() const override { return ckpt_->labels(); }
    std::string task() const override { return ckpt_->variant().arch.task; }
    std::string precision() const override { return cpu::to_string(model_.prec()); }
    void forward(const float * pixel_values, output_buffers & out) override {
        model_.forward(pixel_values, out.at("logits"), out.at("pred_boxes"));
        if (!model_.segmentation()) return;
        // The selection comes from the logits just written; only those queries' masks are computed, and none
        // at all (not even the head's query-independent part) when no row is selected.
        const std::vector<uint32_t> & rows = out.rows();
        if (!rows.empty()) model_.masks(rows.data(), static_cast<int>(rows.size()), out.at("pred_masks"));
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
    cpu::precision p = cpu::precision::fp32;  // "": the default, fp32
    if (!opts.precision.empty() && !cpu::precision_from_string(opts.precision, p)) {
        throw error("cpu_engine_create: precision '" + opts.precision +
                    "' is not supported by the cpu engine; expected fp32, int8 or bf16");
    }
    apply_isa_cap();
    if (const std::string why = cpu_precision_refusal(opts.precision); !why.empty()) throw error(why);
    const int threads = opts.threads == 0 ? physical_core_count() : opts.threads;
    auto ckpt = checkpoint::open(weights_dir);
    return std::make_unique<cpu_engine>(std::move(ckpt), threads, p);
}

std::string cpu_precision_refusal(const std::string & precision) {
    if (precision != "bf16") return "";
    // The level RFDETR_CPU_ISA names decides the kernels; an invalid level is cpu_engine_create's error to report.
    try {
        apply_isa_cap();
    } catch (const error &) {
    }
    std::string missing;
    if (cpu::bf16_supported(missing)) return "";
    const char * cap = std::getenv("RFDETR_CPU_ISA");
    if (std::string(cpu::bgemm_best_isa()) != "none" && cap != nullptr) {
        return "--precision bf16 needs AVX512-BF16 or AMX-BF16 kernels, which RFDETR_CPU_ISA=" + std::string(cap) +
               " excludes on this CPU (" + cpu_model_name() +
               "); unset it or set avx512 or amx, or run fp32 or int8";
    }
    return "--precision bf16 needs AVX512-BF16 or AMX-BF16 instructions, which this CPU (" + cpu_model_name() +
           ") lacks; the cpu engine here runs fp32, int8";
}

}  // namespace rfdetr
