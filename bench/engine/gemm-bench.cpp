// GEMM comparison on the CPU engine's real shapes (not a test): the engine's own packed-weight GEMM
// (gemm.h; AVX-512 and AVX2 kernels), OpenBLAS and (when built with it) oneDNN, each in the threading
// models the engine could use. Prints ms per shape and the per-forward total, weighted by
// how often each shape runs in one forward.
//   gemm-bench [repeats]   (writes nothing; bench-engine.sh captures stdout)
//   gemm-bench --pairs [repeats]: 1 thread, per shape the engine and OpenBLAS alternating call by call (thread CPU
//   time), the median of the per-pair ratios engine / OpenBLAS with its 95 % interval (order statistics): on a
//   machine whose speed drifts, the only way to see a few per cent.
#include "engines/cpu/gemm.h"
#include "engines/cpu/thread-pool.h"

#include <cblas.h>
#ifdef RFDETR_BENCH_DNNL
#include <oneapi/dnnl/dnnl.h>
#endif

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <functional>
#include <map>
#include <mutex>
#include <random>
#include <string>
#include <vector>

namespace {

struct shape {
    const char * what;
    int          m, n, k;
    bool         trans_b;  // B stored [N,K] (torch Linear weight) vs [K,N]
    int          per_forward;
};

// The matrix products of one forward (ViT blocks 0..10; 3x3 convs as im2col GEMMs; global attention
// in query blocks of 64 rows x 6 heads x 3 blocks).
const shape k_shapes[] = {
    {"patch embed 1600x384x588", 1600, 384, 588, true, 1},
    {"vit qkv 1616x1152x384", 1616, 1152, 384, true, 11},
    {"vit proj 1616x384x384", 1616, 384, 384, true, 11},
    {"vit fc1 1616x1536x384", 1616, 1536, 384, true, 11},
    {"vit fc2 1616x384x1536", 1616, 384, 1536, true, 11},
    {"proj cv1 1600x256x1536", 1600, 256, 1536, true, 1},
    {"proj 3x3 1600x128x1152", 1600, 128, 1152, true, 6},
    {"proj cv2 1600x256x640", 1600, 256, 640, true, 1},
    {"attn qk 64x1616x64", 64, 1616, 64, true, 26 * 6 * 3},
    {"attn pv 64x64x1616", 64, 64, 1616, false, 26 * 6 * 3},
    {"dec ffn1 300x2048x256", 300, 2048, 256, true, 3},
    {"dec value 1600x256x256", 1600, 256, 256, true, 3},
};

bool g_cpu_time = false;  // single-thread rows: this thread's CPU time, robust on a shared machine

double now_ms() {
    if (g_cpu_time) {
        timespec ts{};
        clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
        return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
    }
    return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

using gemm_fn = std::function<void(const shape &, const float *, const float *, float *, int m0, int m1)>;

void blas_gemm(const shape & s, const float * a, const float * b, float * c, int m0, int m1) {
    cblas_sgemm(CblasRowMajor, CblasNoTrans, s.trans_b ? CblasTrans : CblasNoTrans, m1 - m0, s.n, s.k, 1.0f,
                a + static_cast<size_t>(m0) * s.k, s.k, b, s.trans_b ? s.k : s.n, 0.0f,
                c + static_cast<size_t>(m0) * s.n, s.n);
}

// The engine's GEMM: the weight packed once (outside the timing: the first two calls are not timed),
// per-thread scratch for the packed activations, a plain store epilogue.
void engine_gemm(const shape & s, const float * a, const float * b, float * c, int m0, int m1) {
    static std::map<std::pair<const shape *, std::string>, rfdetr::cpu::packed_weight> packed;  // per shape: B is refilled identically
    thread_local std::vector<float> scratch;
    if (!s.trans_b) {
        blas_gemm(s, a, b, c, m0, m1);  // [K,N] operands (attention p*v) are the fused attention's job
        return;
    }
    const auto key = std::make_pair(&s, std::string(rfdetr::cpu::gemm_isa()));
    static std::mutex mu;
    const rfdetr::cpu::packed_weight * w;
    {
        std::lock_guard<std::mutex> lock(mu);
        auto it = packed.find(key);
        if (it == packed.end()) it = packed.emplace(key, rfdetr::cpu::pack_weight(b, s.n, s.k, s.k)).first;
        w = &it->second;
    }
    if (scratch.size() < rfdetr::cpu::gemm_scratch_floats(s.k)) scratch.resize(rfdetr::cpu::gemm_scratch_floats(s.k));
    rfdetr::cpu::gemm_packed(m1 - m0, a + static_cast<size_t>(m0) * s.k, s.k, *w, c + static_cast<size_t>(m0) * s.n,
                             s.n, rfdetr::cpu::epilogue{}, scratch.data());
}

#ifdef RFDETR_BENCH_DNNL
void onednn_gemm(const shape & s, const float * a, const float * b, float * c, int m0, int m1) {
    dnnl_sgemm('N', s.trans_b ? 'T' : 'N', m1 - m0, s.n, s.k, 1.0f, a + static_cast<size_t>(m0) * s.k, s.k, b,
               s.trans_b ? s.k : s.n, 0.0f, c + static_cast<size_t>(m0) * s.n, s.n);
}
#endif

// A shape's operands: a and b uniform in [-1, 1) from a fixed seed, c the output.
struct operands {
    std::vector<float> a, b, c;
    explicit operands(const shape & s)
        : a(static_cast<size_t>(s.m) * s.k), b(static_cast<size_t>(s.n) * s.k), c(static_cast<size_t>(s.m) * s.n) {
        std::mt19937                          rng(1);
        std::uniform_real_distribution<float> u(-1.0f, 1.0f);
        for (auto & v : a) v = u(rng);
        for (auto & v : b) v = u(rng);
    }
};

// split = true: the caller splits M over the pool (library single-threaded); false: one call, library threads.
double time_shape(const shape & s, const gemm_fn & fn, rfdetr::thread_pool * pool, int repeats) {
    operands            x(s);
    std::vector<double> t;
    for (int r = 0; r < repeats + 2; ++r) {
        const double t0 = now_ms();
        if (pool) {
            const int parts = pool->size();
            pool->parallel_for(parts, [&](int p, int) {
                const int m0 = s.m * p / parts, m1 = s.m * (p + 1) / parts;
                fn(s, x.a.data(), x.b.data(), x.c.data(), m0, m1);
            });
        } else {
            fn(s, x.a.data(), x.b.data(), x.c.data(), 0, s.m);
        }
        if (r >= 2) t.push_back(now_ms() - t0);
    }
    std::sort(t.begin(), t.end());
    return t[t.size() / 2];
}

void run(const char * name, const gemm_fn & fn, rfdetr::thread_pool * pool, int repeats) {
    double total = 0, flops = 0;
    std::printf("%s\n", name);
    for (const auto & s : k_shapes) {
        const double ms = time_shape(s, fn, pool, repeats);
        const double gf = 2.0 * s.m * s.n * s.k / (ms * 1e6);
        std::printf("  %-28s %8.3f ms  %6.1f GFLOP/s  x%d\n", s.what, ms, gf, s.per_forward);
        total += ms * s.per_forward;
        flops += 2.0 * s.m * s.n * s.k * s.per_forward;
    }
    std::printf("  total per forward: %.1f ms (%.1f GFLOP, %.1f GFLOP/s)\n", total, flops / 1e9, flops / (total * 1e6));
}

// --pairs: one shape's engine and OpenBLAS calls alternating (the order flipping each pair), ratio per pair.
void run_pairs(int repeats) {
    std::printf("engine gemm_packed (%s) / OpenBLAS, 1 thread, alternating call by call (thread CPU time)\n",
                rfdetr::cpu::gemm_isa());
    for (const auto & s : k_shapes) {
        if (!s.trans_b) continue;  // the engine calls OpenBLAS itself for [K,N] operands
        operands x(s);
        auto     time_one = [&](const gemm_fn & fn) {
            const double t0 = now_ms();
            fn(s, x.a.data(), x.b.data(), x.c.data(), 0, s.m);
            return now_ms() - t0;
        };
        for (int w = 0; w < 2; ++w) time_one(engine_gemm), time_one(blas_gemm);
        std::vector<double> ratio, te, tb;
        for (int r = 0; r < repeats; ++r) {
            double e, o;
            if (r % 2 == 0) e = time_one(engine_gemm), o = time_one(blas_gemm);
            else o = time_one(blas_gemm), e = time_one(engine_gemm);
            ratio.push_back(e / o), te.push_back(e), tb.push_back(o);
        }
        for (auto * v : {&ratio, &te, &tb}) std::sort(v->begin(), v->end());
        const int n = repeats, k = std::max(0, static_cast<int>(n / 2.0 - 0.98 * std::sqrt(n)));
        std::printf("  %-28s engine %8.3f ms  OpenBLAS %8.3f ms  ratio %.3f [%.3f-%.3f]  x%d\n", s.what, te[n / 2],
                    tb[n / 2], ratio[n / 2], ratio[k], ratio[n - 1 - k], s.per_forward);
    }
}

}  // namespace

int main(int argc, char ** argv) {
    if (argc > 1 && std::string(argv[1]) == "--pairs") {
        openblas_set_num_threads(1);
        g_cpu_time = true;
        run_pairs(argc > 2 ? std::max(1, std::atoi(argv[2])) : 40);
        return 0;
    }

    const int repeats = argc > 1 ? std::atoi(argv[1]) : 10;
    const int cores   = rfdetr::physical_core_count();
    std::printf("gemm-bench: %d physical cores; OpenBLAS %s (%s)\n", cores, openblas_get_config(), openblas_get_corename());
    rfdetr::thread_pool pool(cores);
    openblas_set_num_threads(1);
    g_cpu_time = true;
    run("OpenBLAS, 1 thread (thread CPU time)", blas_gemm, nullptr, repeats);
    for (const char * isa : {"avx512", "avx2"}) {
        if (!rfdetr::cpu::gemm_select_isa(isa)) continue;
        const std::string name = std::string("engine gemm_packed (") + isa + "), 1 thread (thread CPU time)";
        run(name.c_str(), engine_gemm, nullptr, repeats);
    }
    rfdetr::cpu::gemm_select_isa("avx512");
#ifdef RFDETR_BENCH_DNNL
    run("oneDNN dnnl_sgemm, 1 thread (thread CPU time; needs OMP_NUM_THREADS=1)", onednn_gemm, nullptr, repeats);
#endif
    g_cpu_time = false;
    if (std::getenv("GEMM_BENCH_SINGLE_ONLY")) return 0;
    run("OpenBLAS, 1 BLAS thread, M split over our pool", blas_gemm, &pool, repeats);
    run("engine gemm_packed, M split over our pool", engine_gemm, &pool, repeats);
    openblas_set_num_threads(cores);
    run("OpenBLAS, its own threads", blas_gemm, nullptr, repeats);
    openblas_set_num_threads(1);
#ifdef RFDETR_BENCH_DNNL
    // oneDNN's threading is OpenMP in Debian's build: OMP_NUM_THREADS=1 makes the split-M row meaningful.
    run("oneDNN dnnl_sgemm, M split over our pool", onednn_gemm, &pool, repeats);
    run("oneDNN dnnl_sgemm, its own threads", onednn_gemm, nullptr, repeats);
#endif
    return 0;
}
