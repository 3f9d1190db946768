// Median wall and thread-CPU ms per preprocess (RGB u8 -> f32 [3,S,S]) for the plain reference and each
// SIMD level this CPU runs, on noise images (the cost does not depend on the content), on ordinary memory:
// one thread, and with the helper thread (wall). Built with -DRFDETR_BASELINE=DIR, each level also runs
// that tree's preprocessor, alternating run by run with this one's, checks both give the same bits, and
// prints this/baseline ratios.
//   bench-preprocess [--out FILE] [--size S]
#include "preprocess/preprocess.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <functional>
#include <utility>
#include <string>
#include <vector>

#if RFDETR_BENCH_BASELINE
void * baseline_preprocessor_new(int out_size, int level, bool use_helper);  // baseline-shim.cpp
void   baseline_preprocessor_run(void * p, const uint8_t * rgb, int width, int height, float * out);
void   baseline_preprocessor_free(void * p);
#endif

namespace {

double thread_cpu_ms() {
    timespec ts{};
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

struct timing {
    double wall_ms;
    double cpu_ms;
};

timing median_of(int runs, const std::function<void()> & fn) {
    std::vector<double> wall, cpu;
    fn();  // warm: page-faults buffers, fills the weight caches
    for (int i = 0; i < runs; i++) {
        const auto   t0 = std::chrono::steady_clock::now();
        const double c0 = thread_cpu_ms();
        fn();
        cpu.push_back(thread_cpu_ms() - c0);
        wall.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
    }
    std::sort(wall.begin(), wall.end());
    std::sort(cpu.begin(), cpu.end());
    return {wall[wall.size() / 2], cpu[cpu.size() / 2]};
}

// Medians of two functions run alternately (a, b, b, a, ...), so load from other processes falls on both.
std::pair<timing, timing> median_ab(int runs, const std::function<void()> & a, const std::function<void()> & b) {
    std::vector<double> wall[2], cpu[2];
    a();
    b();
    for (int i = 0; i < 2 * runs; i++) {
        const int which = (i % 4 == 0 || i % 4 == 3) ? 0 : 1;
        const auto   t0 = std::chrono::steady_clock::now();
        const double c0 = thread_cpu_ms();
        (which == 0 ? a : b)();
        cpu[which].push_back(thread_cpu_ms() - c0);
        wall[which].push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
    }
    timing t[2];
    for (int w = 0; w < 2; w++) {
        std::sort(wall[w].begin(), wall[w].end());
        std::sort(cpu[w].begin(), cpu[w].end());
        t[w] = {wall[w][wall[w].size() / 2], cpu[w][cpu[w].size() / 2]};
    }
    return {t[0], t[1]};
}

std::string json_row(const std::string & image, int s, const std::string & impl, const timing & t) {
    return "  {\"image\": \"" + image + "\", \"size\": " + std::to_string(s) + ", \"impl\": \"" + impl +
           "\", \"wall_ms\": " + std::to_string(t.wall_ms) + ", \"cpu_ms\": " + std::to_string(t.cpu_ms) + "},\n";
}

}  // namespace

int main(int argc, char ** argv) {
    std::string out_path;
    int         s = 560;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!std::strcmp(argv[i], "--out")) {
            out_path = argv[i + 1];
        } else if (!std::strcmp(argv[i], "--size")) {
            s = std::atoi(argv[i + 1]);
        }
    }
    struct image {
        int w, h, runs_ref, runs_fast;
    };
    const image images[] = {{640, 480, 15, 101}, {4000, 3000, 5, 31}};
    std::string json = "[\n";
    for (const auto & im : images) {
        std::vector<uint8_t> rgb(static_cast<size_t>(im.w) * im.h * 3);
        uint32_t             x = 12345;
        for (auto & b : rgb) {
            x ^= x << 13;
            x ^= x >> 17;
            x ^= x << 5;
            b = static_cast<uint8_t>(x >> 7);
        }
        std::vector<float> px(3u * s * s);
        const std::string  name = std::to_string(im.w) + "x" + std::to_string(im.h);
        const timing       ref = median_of(im.runs_ref, [&] { rfdetr::preprocess_reference(rgb.data(), im.w, im.h, s, px.data()); });
        std::printf("%s -> %d  reference      %8.3f ms wall  %8.3f ms cpu\n", name.c_str(), s, ref.wall_ms, ref.cpu_ms);
        json += json_row(name, s, "reference", ref);
        for (auto l : {rfdetr::simd_level::SIMD_SCALAR, rfdetr::simd_level::SIMD_AVX2, rfdetr::simd_level::SIMD_AVX512}) {
            if (!rfdetr::simd_level_supported(l)) {
                continue;
            }
            for (bool helper : {false, true}) {
                const std::string    impl = std::string(rfdetr::simd_level_name(l)) + (helper ? "+helper" : "");
                rfdetr::preprocessor p(s, l, helper);
                const auto           run_this = [&] { p.run(rgb.data(), im.w, im.h, px.data()); };
#if RFDETR_BENCH_BASELINE
                void *             base = baseline_preprocessor_new(s, static_cast<int>(l), helper);
                std::vector<float> px_base(px.size());
                const auto         run_base = [&] { baseline_preprocessor_run(base, rgb.data(), im.w, im.h, px_base.data()); };
                const auto         ab       = median_ab(im.runs_fast, run_this, run_base);
                const bool         same     = std::memcmp(px.data(), px_base.data(), px.size() * sizeof(float)) == 0;
                baseline_preprocessor_free(base);
                std::printf("%s -> %d  %-14s %8.3f ms wall  %8.3f ms cpu   baseline %8.3f wall %8.3f cpu   this/baseline "
                            "wall %.2f cpu %.2f%s\n",
                            name.c_str(), s, impl.c_str(), ab.first.wall_ms, ab.first.cpu_ms, ab.second.wall_ms,
                            ab.second.cpu_ms, ab.first.wall_ms / ab.second.wall_ms, ab.first.cpu_ms / ab.second.cpu_ms,
                            same ? "" : "   BITS DIFFER FROM THE BASELINE");
                json += json_row(name, s, impl, ab.first);
                json += json_row(name, s, "baseline " + impl, ab.second);
                if (!same) {
                    return 1;
                }
#else
                const timing t = median_of(im.runs_fast, run_this);
                std::printf("%s -> %d  %-14s %8.3f ms wall  %8.3f ms cpu  (%.1fx the reference's cpu)\n", name.c_str(), s,
                            impl.c_str(), t.wall_ms, t.cpu_ms, ref.cpu_ms / t.cpu_ms);
                json += json_row(name, s, impl, t);
#endif
            }
        }
    }
    json.erase(json.size() - 2, 1);
    json += "]\n";
    if (!out_path.empty()) {
        FILE * f = std::fopen(out_path.c_str(), "w");
        if (!f) {
            std::perror(out_path.c_str());
            return 1;
        }
        std::fputs(json.c_str(), f);
        std::fclose(f);
        std::printf("results: %s\n", out_path.c_str());
    }
    return 0;
}
