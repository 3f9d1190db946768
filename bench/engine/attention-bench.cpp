// One attention head on the model's shapes (not a test): the fp32 fused attention (attention.h) against the
// bf16 attention's kernels (attention-bf16.h: AMX, AVX512-BF16) and the int8 one (attention-int8.h: AVX-512 VNNI),
// this thread's CPU time, median of the repeats, the kernels interleaved within each repeat so the machine's load
// hits them alike.
//   attention-bench [repeats [kernel]]   (kernel: fp32, amx, avx512bf16 or int8 to time only that one, e.g. under perf)
#include "engines/cpu/attention-bf16.h"
#include "engines/cpu/attention-int8.h"
#include "engines/cpu/attention.h"

#include <algorithm>
#include <cstdint>
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
    int          n, d, ld;  // nq = nk = n; q, k, v rows of stride ld (the qkv GEMM's output)
    float        scale;
    int          per_forward;  // Base
};

const shape k_shapes[] = {
    {"vit global head 1616x1616 d64", 1616, 64, 1152, 0.125f, 3 * 6},
    {"vit window head 101x101 d64", 101, 64, 1152, 0.125f, 8 * 16 * 6},
    {"decoder head 300x300 d32", 300, 32, 512, 1.0f, 3 * 8},
};

double thread_ms() {
    timespec ts{};
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

double median(std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
}

float * aligned(std::vector<float> & v) {
    return reinterpret_cast<float *>((reinterpret_cast<uintptr_t>(v.data()) + 63) & ~uintptr_t{63});
}

}  // namespace

int main(int argc, char ** argv) {
    const int repeats = argc > 1 ? std::atoi(argv[1]) : 15;
    std::string why;
    const bool  bf16 = cpu::attention_bf16_supported(why);
    if (!bf16) std::printf("# %s: the bf16 kernels are not timed\n", why.c_str());
    const std::string best = cpu::attention_bf16_isa();
    const std::string        only = argc > 2 ? argv[2] : "";
    std::vector<std::string> kernels;
    if (only.empty() || only == "fp32") kernels.push_back("fp32");
    for (const char * k : {"amx", "avx512bf16"}) {
        if ((only.empty() || only == k) && bf16 && cpu::attention_bf16_select_isa(k)) kernels.push_back(k);
    }
    if ((only.empty() || only == "int8") && cpu::attention_int8_supported()) kernels.push_back("int8");
    if (kernels.empty()) {
        std::fprintf(stderr, "attention-bench: no kernel '%s' on this CPU; expected fp32, amx, avx512bf16 or int8\n",
                     only.c_str());
        return 1;
    }
    std::printf("# ms of this thread's CPU time per head, median of %d; x: fp32 / kernel\n", repeats);
    std::printf("%-32s", "shape");
    for (const auto & k : kernels) std::printf(" %12s", k.c_str());
    std::printf("   per Base forward (ms)\n");
    std::mt19937                          rng(1);
    std::uniform_real_distribution<float> u(-1.5f, 1.5f);
    for (const shape & s : k_shapes) {
        std::vector<float> qkv(static_cast<size_t>(s.n) * s.ld);
        for (auto & x : qkv) x = u(rng);
        const int          ldo = s.ld / 3;
        std::vector<float> o(static_cast<size_t>(s.n) * ldo);
        const size_t       fp32_scratch = cpu::attention_head_scratch_floats(s.n, s.d);
        const size_t bf16_scratch = bf16 ? cpu::attention_bf16_head_scratch_floats(s.n, s.d) : 0;
        const size_t int8_scratch = cpu::attention_int8_head_scratch_floats(s.n, s.d);
        std::vector<float> scratch(std::max({fp32_scratch, bf16_scratch, int8_scratch}) + 16);
        std::vector<std::vector<double>> t(kernels.size());
        for (int r = 0; r < repeats; ++r) {
            for (size_t ki = 0; ki < kernels.size(); ++ki) {
                const float * q = qkv.data(), *k = q + ldo, *v = k + ldo;
                const double  t0 = thread_ms();
                if (kernels[ki] == "fp32") {
                    cpu::attention_head(q, s.ld, k, s.ld, v, s.ld, o.data(), ldo, s.n, s.n, s.d, s.scale, aligned(scratch));
                } else if (kernels[ki] == "int8") {
                    cpu::attention_int8_head(q, s.ld, k, s.ld, v, s.ld, o.data(), ldo, s.n, s.n, s.d, s.scale,
                                             aligned(scratch));
                } else {
                    cpu::attention_bf16_select_isa(kernels[ki].c_str());
                    cpu::attention_bf16_head(q, s.ld, k, s.ld, v, s.ld, o.data(), ldo, s.n, s.n, s.d, s.scale,
                                             aligned(scratch));
                }
                t[ki].push_back(thread_ms() - t0);
            }
        }
        std::printf("%-32s", s.what);
        for (size_t ki = 0; ki < kernels.size(); ++ki) {
            std::printf(" %8.4f", median(t[ki]));
            if (kernels[0] == "fp32" && ki > 0) {
                std::printf(" x%4.1f", median(t[0]) / median(t[ki]));
            } else {
                std::printf("      ");
            }
        }
        std::printf("  ");
        for (size_t ki = 0; ki < kernels.size(); ++ki) std::printf(" %s %.1f", kernels[ki].c_str(), median(t[ki]) * s.per_forward);
        std::printf("\n");
    }
    if (!best.empty()) cpu::attention_bf16_select_isa(best.c_str());
    return 0;
}
