// CPU engine benchmark (not a test): cold start, median forward with a per-stage split, RSS, and the
// peers (ONNX Runtime at 2 intra-op threads, torch eager) on the same seed-1 weights and case-1 input in
// the same run, with ratios. Writes a JSON result file.
//   bench-engine --weights DIR [--input golden.safetensors] [--runs N] [--threads N]
//                [--peers DIR | --no-peers] [--out FILE]
#include "engines/cpu/cpu-engine.h"
#include "engines/cpu/cpu-model.h"
#include "golden-file.h"
#include "model/checkpoint.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <sys/resource.h>
#include <sys/stat.h>
#include <vector>

namespace {

double now_ms() {
    return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

double median(std::vector<double> v) {
    std::sort(v.begin(), v.end());
    const size_t n = v.size();
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

double status_mib(const char * key) {
    std::ifstream in("/proc/self/status");
    std::string   line;
    while (std::getline(in, line)) {
        if (line.rfind(key, 0) == 0) return std::atof(line.c_str() + std::string(key).size()) / 1024.0;
    }
    return NAN;
}

double process_cpu_ms() {
    rusage ru{};
    getrusage(RUSAGE_SELF, &ru);
    return (ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1e3 + (ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e3;
}

bool exists(const std::string & p) {
    struct stat st {};
    return stat(p.c_str(), &st) == 0;
}

// Runs a peer command and returns its last JSON line (or null with the reason printed).
nlohmann::json run_peer(const std::string & cmd) {
    std::fprintf(stderr, "run_peer: %s\n", cmd.c_str());
    FILE * p = popen((cmd + " 2>/dev/null").c_str(), "r");
    if (!p) return nullptr;
    std::string out;
    std::array<char, 4096> buf;
    while (fgets(buf.data(), buf.size(), p)) out += buf.data();
    const int rc = pclose(p);
    const auto start = out.rfind("\n{", out.size() >= 2 ? out.size() - 2 : 0);
    const std::string line = out.substr(start == std::string::npos ? 0 : start + 1);
    try {
        return nlohmann::json::parse(line);
    } catch (const std::exception &) {
        std::fprintf(stderr, "run_peer: no JSON from '%s' (exit %d)\n", cmd.c_str(), rc);
        return nullptr;
    }
}

double max_abs(const std::vector<float> & a, const std::vector<float> & b) {
    double m = 0.0;
    for (size_t i = 0; i < a.size(); ++i) m = std::max(m, std::fabs(static_cast<double>(a[i]) - b[i]));
    return m;
}

}  // namespace

int main(int argc, char ** argv) {
    std::string weights, input = std::string(RFDETR_REPO_ROOT_DIR) + "/test/fixtures/rfdetr-synth/case-1/golden.safetensors";
    std::string peers = std::getenv("PEERS_DIR") ? std::getenv("PEERS_DIR") : std::string(RFDETR_REPO_ROOT_DIR) + "/../shared/peers-cache";
    std::string peers_src = std::string(RFDETR_REPO_ROOT_DIR) + "/../shared/peers";
    std::string out_path  = std::string(RFDETR_REPO_ROOT_DIR) + "/bench/engine/results.json";
    int         runs = 10, threads = 0;
    bool        with_peers = true;
    for (int i = 1; i < argc; ++i) {
        const std::string a    = argv[i];
        auto              next = [&]() -> std::string {
            if (i + 1 >= argc) {
                std::fprintf(stderr, "bench-engine: %s needs a value\n", a.c_str());
                std::exit(2);
            }
            return argv[++i];
        };
        if (a == "--weights") weights = next();
        else if (a == "--input") input = next();
        else if (a == "--runs") runs = std::max(1, std::atoi(next().c_str()));
        else if (a == "--threads") threads = std::atoi(next().c_str());
        else if (a == "--peers") peers = next();
        else if (a == "--peers-src") peers_src = next();
        else if (a == "--no-peers") with_peers = false;
        else if (a == "--out") out_path = next();
        else {
            std::fprintf(stderr, "bench-engine: unknown argument '%s'\n", a.c_str());
            return 2;
        }
    }
    if (weights.empty()) {
        std::fprintf(stderr, "bench-engine: --weights DIR is required (a seed-1 checkpoint: rfdetr-synth --seed 1 --out DIR)\n");
        return 2;
    }
    const auto g = rfdetr::test::read_golden(input);
    const auto & px = g.at("pixel_values").f32;

    nlohmann::json res;
    const double rss_start = status_mib("VmRSS:");
    // Phase 1, the product path: cold start as the sidecar does it (engine_create + two warm-up forwards),
    // RSS after warm-up, then the timed forwards through the engine interface.
    rfdetr::engine_options opts;
    opts.threads = threads;
    const double t0      = now_ms();
    auto         eng     = rfdetr::cpu_engine_create(weights, opts);
    const double load_ms = now_ms() - t0;
    const int    nc      = eng->num_classes();
    std::vector<float> logits(static_cast<size_t>(rfdetr::cpu::k_queries) * nc), boxes(rfdetr::cpu::k_queries * 4);
    std::vector<double> warm;
    for (int i = 0; i < 2; ++i) {
        const double s = now_ms();
        eng->forward(px.data(), logits.data(), boxes.data());
        warm.push_back(now_ms() - s);
    }
    const double cold_ms  = now_ms() - t0;
    const double rss_warm = status_mib("VmRSS:");
    std::vector<double> times;
    const double cpu0 = process_cpu_ms();
    for (int r = 0; r < runs; ++r) {
        const double s = now_ms();
        eng->forward(px.data(), logits.data(), boxes.data());
        times.push_back(now_ms() - s);
    }
    const double med = median(times);
    // CPU time per forward (all threads): with the wall time it shows the parallel efficiency, and it is
    // less sensitive than wall time to other processes on a shared machine.
    res["engine"]["cpu_ms_per_forward"] = (process_cpu_ms() - cpu0) / runs;
    res["engine"]["device"]             = eng->device();
    const double vmhwm                  = status_mib("VmHWM:");
    eng.reset();

    // Phase 2: the per-stage split, from the model's own stage clocks (same code, same buffers).
    const int nthreads = threads > 0 ? threads : rfdetr::physical_core_count();
    std::vector<std::vector<double>> stages(rfdetr::cpu::STAGE_COUNT);
    {
        auto               ckpt = rfdetr::checkpoint::open(weights);
        rfdetr::cpu::model model(*ckpt, nthreads);
        model.forward(px.data(), logits.data(), boxes.data());
        for (int r = 0; r < runs; ++r) {
            model.forward(px.data(), logits.data(), boxes.data());
            for (int st = 0; st < rfdetr::cpu::STAGE_COUNT; ++st) stages[st].push_back(model.stage_ms()[st]);
        }
    }
    // Phase 3: CPU time per forward on one thread, the load-independent comparison with ORT's.
    double cpu_1t = NAN;
    {
        auto               ckpt = rfdetr::checkpoint::open(weights);
        rfdetr::cpu::model model(*ckpt, 1);
        model.forward(px.data(), logits.data(), boxes.data());
        const double c0 = process_cpu_ms();
        for (int r = 0; r < runs; ++r) model.forward(px.data(), logits.data(), boxes.data());
        cpu_1t = (process_cpu_ms() - c0) / runs;
    }
    res["engine"]["cpu_ms_per_forward_1_thread"] = cpu_1t;
    res["engine"]["threads"]          = nthreads;
    res["engine"]["runs_ms"]          = times;
    res["engine"]["median_ms"]        = med;
    res["engine"]["min_ms"]           = *std::min_element(times.begin(), times.end());
    res["engine"]["warmup_ms"]        = warm;
    res["engine"]["load_ms"]          = load_ms;
    res["engine"]["cold_start_ms"]    = cold_ms;
    res["engine"]["rss_start_MiB"]    = rss_start;
    res["engine"]["rss_after_warmup_MiB"] = rss_warm;
    res["engine"]["vmhwm_peak_MiB"]   = vmhwm;
    res["engine"]["maxabs_logits"]    = g.count("logits") ? max_abs(logits, g.at("logits").f32) : NAN;
    res["engine"]["maxabs_pred_boxes"] = g.count("pred_boxes") ? max_abs(boxes, g.at("pred_boxes").f32) : NAN;
    for (int st = 0; st < rfdetr::cpu::STAGE_COUNT; ++st) {
        res["engine"]["stages_median_ms"][rfdetr::cpu::stage_str(static_cast<rfdetr::cpu::stage>(st))] = median(stages[st]);
    }

    std::printf("cpu engine: %s\n", res["engine"]["device"].get<std::string>().c_str());
    std::printf("  forward median %.1f ms (min %.1f) over %d runs after 2 warm-ups; CPU time %.1f ms per forward\n",
                med, res["engine"]["min_ms"].get<double>(), runs, res["engine"]["cpu_ms_per_forward"].get<double>());
    for (int st = 0; st < rfdetr::cpu::STAGE_COUNT; ++st) {
        std::printf("    %-10s %7.1f ms\n", rfdetr::cpu::stage_str(static_cast<rfdetr::cpu::stage>(st)), median(stages[st]));
    }
    std::printf("  CPU time per forward on 1 thread: %.1f ms\n", cpu_1t);
    std::printf("  cold start (engine_create %.0f ms + 2 warm-up forwards) %.0f ms\n", load_ms, cold_ms);
    std::printf("  RSS after warm-up %.1f MiB, peak %.1f MiB\n", rss_warm, res["engine"]["vmhwm_peak_MiB"].get<double>());
    std::printf("  max-abs vs golden: logits %.3g, pred_boxes %.3g\n", res["engine"]["maxabs_logits"].get<double>(),
                res["engine"]["maxabs_pred_boxes"].get<double>());

    if (with_peers) {
        if (!exists(peers + "/rfdetr_base_seed1.onnx") || !exists(peers_src + "/bench.js")) {
            std::printf("peers: not prepared (looked for %s/rfdetr_base_seed1.onnx and %s/bench.js); prepare them with\n"
                        "  PEERS_DIR=%s bash %s/prepare.sh   (minutes; downloads torch)\n",
                        peers.c_str(), peers_src.c_str(), peers.c_str(), peers_src.c_str());
            res["peers"] = "not prepared";
        } else {
            const std::string env = "PEERS_DIR='" + peers + "' ";
            auto ort = run_peer(env + "node '" + peers_src + "/bench.js' 2");
            auto ort_cpu = run_peer(env + "node '" + std::string(RFDETR_REPO_ROOT_DIR) + "/bench/engine/ort-cpu.cjs' 1 " +
                                    std::to_string(runs) + " '" + input + "'");
            res["peers"]["onnxruntime_1_thread_cpu"] = ort_cpu;
            if (ort_cpu.is_object() && ort_cpu.contains("cpu_ms_per_forward")) {
                const double o = ort_cpu["cpu_ms_per_forward"].get<double>();
                res["ratios"]["ort_over_engine_cpu_time_1_thread"] = o / cpu_1t;
                std::printf("ONNX Runtime (1 thread): CPU time %.1f ms per forward  ->  ORT/engine CPU-time ratio %.2fx\n",
                            o, o / cpu_1t);
            }
            auto trc = run_peer(env + "OPENBLAS_NUM_THREADS=" + std::to_string(nthreads) + " /usr/bin/python3 '" +
                                peers_src + "/torch_bench.py' 1");
            res["peers"]["onnxruntime_2_threads"] = ort;
            res["peers"]["torch_eager"]           = trc;
            if (ort.is_object() && ort.contains("median_ms")) {
                const double o = ort["median_ms"].get<double>();
                res["ratios"]["ort_over_engine"] = o / med;
                std::printf("ONNX Runtime (2 threads): median %.1f ms, RSS %.1f MiB  ->  engine is %.2fx faster\n", o,
                            ort.value("rss_after_runs_MiB", NAN), o / med);
            }
            if (trc.is_object() && trc.contains("median_ms")) {
                const double t = trc["median_ms"].get<double>();
                res["ratios"]["torch_over_engine"] = t / med;
                std::printf("torch eager (1 torch thread, BLAS %d): median %.1f ms  ->  engine is %.2fx faster\n",
                            nthreads, t, t / med);
            }
        }
    }
    std::ofstream(out_path) << res.dump(2) << "\n";
    std::printf("results written to %s\n", out_path.c_str());
    return 0;
}
