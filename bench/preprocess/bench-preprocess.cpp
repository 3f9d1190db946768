// Median wall and thread-CPU ms per preprocess (RGB u8 -> f32 [3,S,S]) for the plain reference and each
// SIMD level this CPU runs, one thread, on noise images (the cost does not depend on the content).
//   bench-preprocess [--out FILE] [--size S]
#include "preprocess/preprocess.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <functional>
#include <string>
#include <vector>

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
        const timing       ref = median_of(im.runs_ref, [&] { rfdetr::preprocess_reference(rgb.data(), im.w, im.h, s, px.data()); });
        std::printf("%dx%d -> %d  reference      %8.2f ms wall  %8.2f ms cpu\n", im.w, im.h, s, ref.wall_ms, ref.cpu_ms);
        json += "  {\"image\": \"" + std::to_string(im.w) + "x" + std::to_string(im.h) + "\", \"size\": " +
                std::to_string(s) + ", \"impl\": \"reference\", \"wall_ms\": " + std::to_string(ref.wall_ms) +
                ", \"cpu_ms\": " + std::to_string(ref.cpu_ms) + "},\n";
        for (auto l : {rfdetr::simd_level::SIMD_SCALAR, rfdetr::simd_level::SIMD_AVX2, rfdetr::simd_level::SIMD_AVX512}) {
            if (!rfdetr::simd_level_supported(l)) {
                continue;
            }
            rfdetr::preprocessor p(s, l);
            const timing         t = median_of(im.runs_fast, [&] { p.run(rgb.data(), im.w, im.h, px.data()); });
            std::printf("%dx%d -> %d  fast %-9s %8.2f ms wall  %8.2f ms cpu  (%.1fx the reference's cpu)\n", im.w, im.h,
                        s, rfdetr::simd_level_name(l), t.wall_ms, t.cpu_ms, ref.cpu_ms / t.cpu_ms);
            json += "  {\"image\": \"" + std::to_string(im.w) + "x" + std::to_string(im.h) + "\", \"size\": " +
                    std::to_string(s) + ", \"impl\": \"" + rfdetr::simd_level_name(l) + "\", \"wall_ms\": " +
                    std::to_string(t.wall_ms) + ", \"cpu_ms\": " + std::to_string(t.cpu_ms) + "},\n";
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
