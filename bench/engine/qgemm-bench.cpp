// The int8 and bf16 GEMMs' kernels on the engine's int8/bf16 shapes (not a test): the float GEMM (its best kernel),
// every int8 kernel this CPU runs (AMX, AVX-512 VNNI, AVX-VNNI, AVX2) and every bf16 kernel (bf16-amx,
// bf16-avx512bf16, bgemm.h) on each shape with the epilogue and LayerNorm prologue the model uses there, rows in
// the model's 1-thread row parts (4), the kernels interleaved repeat by repeat so a busy machine slows them
// alike. Prints thread-CPU ms per shape (median of the repeats) and the per-forward total weighted by how
// often each shape runs.   qgemm-bench [repeats [kernel ...]]   (kernels: fp32 amx ... bf16-amx; default all)
#include "engines/cpu/bgemm.h"
#include "engines/cpu/gemm.h"
#include "engines/cpu/qgemm.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <random>
#include <string>
#include <vector>

namespace {

namespace cpu = rfdetr::cpu;

struct shape {
    const char * what;
    int          m, n, k;
    cpu::epi     kind;
    bool         ln;
    int          per_forward;
};

// The int8 GEMMs of one Base forward (cpu-model.cpp): ViT blocks 0..10, projector (3x3 convs as im2col
// GEMMs), decoder layers.
const shape k_shapes[] = {
    {"patch embed 1600x384x588", 1600, 384, 588, cpu::epi::bias, false, 1},
    {"vit qkv 1616x1152x384 +LN", 1616, 1152, 384, cpu::epi::bias, true, 11},
    {"vit proj 1616x384x384", 1616, 384, 384, cpu::epi::bias_scale_add, false, 11},
    {"vit fc1 1616x1536x384 +LN gelu", 1616, 1536, 384, cpu::epi::bias_gelu, true, 11},
    {"vit fc2 1616x384x1536", 1616, 384, 1536, cpu::epi::bias_scale_add, false, 11},
    {"proj cv1 1600x256x1536", 1600, 256, 1536, cpu::epi::store, false, 1},
    {"proj 3x3 1600x128x1152", 1600, 128, 1152, cpu::epi::store, false, 6},
    {"proj cv2 1600x256x640", 1600, 256, 640, cpu::epi::store, false, 1},
    {"dec value 1600x768x256", 1600, 768, 256, cpu::epi::bias, false, 1},
    {"dec ffn1 300x2048x256 relu", 300, 2048, 256, cpu::epi::bias_relu, false, 3},
    {"dec ffn2 300x256x2048", 300, 256, 2048, cpu::epi::bias_residual, false, 3},
};

double thread_ms() {
    timespec ts{};
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

}  // namespace

int main(int argc, char ** argv) {
    const int repeats = argc > 1 ? std::max(1, std::atoi(argv[1])) : 9;
    std::vector<std::string> isas = {"fp32"};
    for (const char * i : {"amx", "avx512vnni", "avxvnni", "avx2"}) {
        if (cpu::qgemm_select_isa(i)) isas.push_back(i);
    }
    for (const char * i : {"amx", "avx512bf16"}) {
        if (cpu::bgemm_select_isa(i)) isas.push_back(std::string("bf16-") + i);
    }
    if (argc > 2) {  // only the named kernels (for perf record)
        std::vector<std::string> keep;
        for (int i = 2; i < argc; ++i) {
            if (std::find(isas.begin(), isas.end(), argv[i]) != isas.end()) keep.push_back(argv[i]);
        }
        isas = keep;
    }
    if (!cpu::qgemm_amx_note().empty()) std::printf("qgemm-bench: %s\n", cpu::qgemm_amx_note().c_str());
    std::printf("qgemm-bench: 1 thread, thread CPU ms per call (median of %d); fp32 = gemm_packed (%s), then the int8 and bf16 kernels:",
                repeats, cpu::gemm_isa());
    for (const auto & i : isas) std::printf(" %s", i.c_str());
    std::printf("\n%-32s", "shape");
    for (const auto & i : isas) std::printf(" %15s", i.c_str());
    std::printf("   x/forward\n");
    std::vector<double> total(isas.size(), 0.0);
    std::mt19937        rng(1);
    for (const shape & s : k_shapes) {
        std::uniform_real_distribution<float> u(-1.0f, 1.0f);
        std::vector<float> a(static_cast<size_t>(s.m) * s.k), w(static_cast<size_t>(s.n) * s.k), c(static_cast<size_t>(s.m) * s.n),
            bias(s.n), scale(s.n), g(s.k), b(s.k), scratch(cpu::gemm_scratch_floats(s.k));
        for (auto * v : {&a, &w, &c, &bias, &scale, &b}) {
            for (auto & x : *v) x = u(rng);
        }
        for (auto & x : g) x = 1.0f + 0.5f * u(rng);
        const cpu::packed_weight fw = cpu::pack_weight(w.data(), s.n, s.k, s.k);
        const cpu::qweight       qw = cpu::quantize_weight(w.data(), s.n, s.k, s.k);
        const cpu::bweight       bw = cpu::to_bweight(w.data(), s.n, s.k, s.k);
        const cpu::a_layernorm ln{g.data(), b.data(), 1e-6f};
        cpu::epilogue          e;
        e.kind  = s.kind;
        e.bias  = bias.data();
        e.scale = scale.data();
        std::vector<std::vector<double>> t(isas.size());
        for (int r = 0; r < repeats + 1; ++r) {
            for (size_t i = 0; i < isas.size(); ++i) {
                const bool f32 = isas[i] == "fp32", bf16 = isas[i].rfind("bf16-", 0) == 0;
                if (bf16) cpu::bgemm_select_isa(isas[i].c_str() + 5);
                else if (!f32) cpu::qgemm_select_isa(isas[i].c_str());
                // Residual epilogues accumulate into c: reset it so every call sees finite inputs.
                std::fill(c.begin(), c.end(), 0.5f);
                const double t0 = thread_ms();
                for (int p = 0; p < 4; ++p) {
                    const int r0 = s.m * p / 4, r1 = s.m * (p + 1) / 4;
                    const float * ap = a.data() + static_cast<size_t>(r0) * s.k;
                    float *       cp = c.data() + static_cast<size_t>(r0) * s.n;
                    if (bf16) {
                        cpu::bgemm_packed(r1 - r0, ap, s.k, bw, cp, s.n, e, scratch.data(), s.ln ? &ln : nullptr);
                    } else if (f32) {
                        cpu::gemm_packed(r1 - r0, ap, s.k, fw, cp, s.n, e, scratch.data(), s.ln ? &ln : nullptr);
                    } else {
                        cpu::qgemm_packed(r1 - r0, ap, s.k, qw, cp, s.n, e, scratch.data(), s.ln ? &ln : nullptr);
                    }
                }
                if (r > 0) t[i].push_back(thread_ms() - t0);
            }
        }
        std::printf("%-32s", s.what);
        for (size_t i = 0; i < isas.size(); ++i) {
            std::sort(t[i].begin(), t[i].end());
            const double ms = t[i][t[i].size() / 2];
            total[i] += ms * s.per_forward;
            std::printf(" %12.2f ms", ms);
        }
        std::printf("   x%d\n", s.per_forward);
    }
    std::printf("%-32s", "all these GEMMs of one forward");
    for (double x : total) std::printf(" %12.1f ms", x);
    std::printf("\n");
    return 0;
}
