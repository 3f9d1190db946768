// The CPU engine's precisions side by side (not a test): one process per call loads the seed-1 checkpoint at
// --precision fp32|int8|bf16 with 1 thread (RFDETR_CPU_ISA caps the kernels, as in the sidecar), warms up, then
// prints one JSON line: CPU time per forward (process CPU time over --runs forwards; a busy machine slows the
// wall clock, not this), wall median, RSS after warm-up, and the error against the fp32 golden: max-abs and
// PCC of logits and boxes, and the overlap of the top-100 flattened logits (../shared/peers/int8_peers.py's
// measure). int8-run.sh interleaves it with the int8 peers; threads-run.sh runs it at --threads 1 and 2 (the
// scaling figure: wall median per forward, forwards per second, CPU time per forward).
// --paced: after the warm-up, print "ready" and run one forward per line read on stdin, answering each with
// {"cpu_ms":..,"wall_ms":..,"stage_ms":[wall ms per stage, cpu-model.h's order]}; at end of input the usual line
// over the paced forwards. pair-run.py drives it so that its forwards alternate one by one with a peer's in another
// process (the machine's drift cancels in each pair).
//   int8-bench --weights DIR --golden golden.safetensors [--precision fp32|int8|bf16] [--runs N] [--threads N]
//              [--paced]
#include "engines/cpu/bgemm.h"
#include "engines/cpu/cpu-model.h"
#include "engines/cpu/gemm.h"
#include "engines/cpu/isa-level.h"
#include "engines/cpu/qgemm.h"
#include "golden-file.h"
#include "output-compare.h"
#include "model/checkpoint.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <sys/resource.h>
#include <vector>

namespace {

using rfdetr::test::pcc;
using rfdetr::test::top100_overlap;

double now_ms() {
    return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

double process_cpu_ms() {
    rusage ru{};
    getrusage(RUSAGE_SELF, &ru);
    return (ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1e3 + (ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e3;
}

double rss_mib() {
    std::ifstream in("/proc/self/status");
    std::string   line;
    while (std::getline(in, line)) {
        if (line.rfind("VmRSS:", 0) == 0) return std::atof(line.c_str() + 6) / 1024.0;
    }
    return NAN;
}

double max_abs(const std::vector<float> & a, const std::vector<float> & b) {
    double e = 0;
    for (size_t i = 0; i < a.size(); ++i) e = std::max(e, std::fabs(static_cast<double>(a[i]) - b[i]));
    return e;
}

}  // namespace

int main(int argc, char ** argv) {
    std::string weights, golden, precision = "fp32";
    rfdetr::cpu::precision prec = rfdetr::cpu::precision::fp32;
    int         runs = 8, threads = 1;
    bool        paced = false;
    for (int i = 1; i < argc; ++i) {
        const std::string a = argv[i];
        if (a == "--paced") {
            paced = true;
            continue;
        }
        if (i + 1 >= argc) {
            std::fprintf(stderr, "int8-bench: %s needs a value\n", a.c_str());
            return 2;
        }
        const std::string v = argv[++i];
        if (a == "--weights") weights = v;
        else if (a == "--golden") golden = v;
        else if (a == "--precision") precision = v;
        else if (a == "--runs") runs = std::max(1, std::atoi(v.c_str()));
        else if (a == "--threads") threads = std::max(1, std::atoi(v.c_str()));
        else {
            std::fprintf(stderr, "int8-bench: unknown argument %s (see the header of int8-bench.cpp)\n", a.c_str());
            return 2;
        }
    }
    if (weights.empty() || golden.empty() || !rfdetr::cpu::precision_from_string(precision, prec)) {
        std::fprintf(stderr, "usage: int8-bench --weights DIR --golden golden.safetensors [--precision fp32|int8|bf16] [--runs N] [--threads N] [--paced]\n");
        return 2;
    }
    if (const char * cap = std::getenv("RFDETR_CPU_ISA"); cap && *cap) {
        if (const std::string err = rfdetr::cpu::select_isa_level(cap); !err.empty()) {
            std::fprintf(stderr, "int8-bench: %s\n", err.c_str());
            return 2;
        }
    }
    if (std::string missing; prec == rfdetr::cpu::precision::bf16 && !rfdetr::cpu::bf16_supported(missing)) {
        std::fprintf(stderr, "int8-bench: --precision bf16 needs %s\n", missing.c_str());
        return 2;
    }
    const auto g    = rfdetr::test::read_golden(golden);
    auto       ckpt = rfdetr::checkpoint::open(weights);
    const double rss0 = rss_mib();
    const double t0   = now_ms();
    rfdetr::cpu::model m(*ckpt, threads, prec);
    const double load_ms = now_ms() - t0;
    const int    C       = m.num_classes();
    std::vector<float> logits(static_cast<size_t>(m.dims().queries) * C), boxes(m.dims().queries * 4);
    const float * px = g.at("pixel_values").f32.data();
    for (int i = 0; i < 2; ++i) m.forward(px, logits.data(), boxes.data());
    std::vector<double> wall;
    double              cpu = 0;  // per forward
    if (paced) {
        std::printf("ready\n");
        std::fflush(stdout);
        // Each forward's own CPU time: the time spent waiting for a line is not counted.
        for (char line[64]; std::fgets(line, sizeof line, stdin);) {
            const double c = process_cpu_ms(), t = now_ms();
            m.forward(px, logits.data(), boxes.data());
            const double w = now_ms() - t, f = process_cpu_ms() - c;
            wall.push_back(w);
            cpu += f;
            std::printf("{\"cpu_ms\":%.3f,\"wall_ms\":%.3f,\"stage_ms\":[", f, w);
            for (int i = 0; i < rfdetr::cpu::STAGE_COUNT; ++i) std::printf("%s%.3f", i ? "," : "", m.stage_ms()[i]);
            std::printf("]}\n");
            std::fflush(stdout);
        }
        if (wall.empty()) return 0;
        runs = static_cast<int>(wall.size());
        cpu /= runs;
    } else {
        const double c0 = process_cpu_ms();
        for (int i = 0; i < runs; ++i) {
            const double t = now_ms();
            m.forward(px, logits.data(), boxes.data());
            wall.push_back(now_ms() - t);
        }
        cpu = (process_cpu_ms() - c0) / runs;
    }
    std::sort(wall.begin(), wall.end());
    const auto & gl = g.at("logits").f32;
    const auto & gb = g.at("pred_boxes").f32;
    const size_t overlap = top100_overlap(logits, gl);
    nlohmann::json out = {
        {"peer", "engine"},
        {"precision", precision},
        {"kernels", std::string(rfdetr::cpu::gemm_isa()) + (prec == rfdetr::cpu::precision::int8   ? std::string("+") + rfdetr::cpu::qgemm_isa()
                         : prec == rfdetr::cpu::precision::bf16 ? std::string("+bf16-") + rfdetr::cpu::bgemm_isa()
                                                                : std::string())},
        {"threads", threads},
        {"runs", runs},
        {"cpu_ms_per_forward", std::round(cpu * 10) / 10},
        {"median_ms", std::round(wall[wall.size() / 2] * 10) / 10},
        {"forwards_per_s", std::round(1e6 / wall[wall.size() / 2]) / 1000},
        {"load_ms", std::round(load_ms)},
        {"rss_mib_after_warmup", std::round(rss_mib() * 10) / 10},
        {"rss_mib_before_model", std::round(rss0 * 10) / 10},
        {"maxabs_logits", max_abs(logits, gl)},
        {"maxabs_pred_boxes", max_abs(boxes, gb)},
        {"pcc_logits", pcc(logits, gl)},
        {"pcc_pred_boxes", pcc(boxes, gb)},
        {"top100_overlap", overlap},
    };
    nlohmann::json stages;  // of the last forward, wall ms
    for (int i = 0; i < rfdetr::cpu::STAGE_COUNT; ++i) {
        stages[rfdetr::cpu::stage_str(static_cast<rfdetr::cpu::stage>(i))] = std::round(m.stage_ms()[i] * 10) / 10;
    }
    out["stage_ms_last"] = stages;
    std::printf("%s\n", out.dump().c_str());
    return 0;
}
