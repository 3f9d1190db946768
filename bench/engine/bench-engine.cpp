// CPU engine benchmark (not a test): cold start, median forward with a per-stage split, RSS, then rounds
// that interleave the engine with its CPU peers (ONNX Runtime, OpenVINO fp32) on the same seed-1 weights
// and case-1 input: CPU time per forward at 1 thread, and wall medians at the engine's thread count;
// medians, spread and per-round ratios; torch eager once. Writes a JSON result file.
//   bench-engine --weights DIR [--input golden.safetensors] [--runs N] [--rounds N] [--threads N]
//                [--peers DIR | --no-peers] [--peers-src DIR] [--no-torch] [--out FILE]
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
#include <map>
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

struct spread {
    double median, min, max;
};
spread summarize(const std::vector<double> & v) {
    if (v.empty()) return {NAN, NAN, NAN};
    return {median(v), *std::min_element(v.begin(), v.end()), *std::max_element(v.begin(), v.end())};
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
    if (!std::getenv("PEERS_DIR") && !exists(peers) && std::getenv("HOME")) {
        peers = std::string(std::getenv("HOME")) + "/.cache/rfdetr-peers";  // prepare.sh's default
    }
    int         runs = 10, threads = 0, rounds = 3;
    bool        with_peers = true, with_torch = true;
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
        else if (a == "--rounds") rounds = std::max(1, std::atoi(next().c_str()));
        else if (a == "--no-torch") with_torch = false;
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
    std::vector<float> logits(static_cast<size_t>(eng->num_queries()) * nc), boxes(eng->num_queries() * 4);
    rfdetr::output_buffers outs(eng->outputs());  // the engine interface fills these; the model, logits and boxes
    std::vector<double> warm;
    for (int i = 0; i < 2; ++i) {
        const double s = now_ms();
        eng->forward(px.data(), outs);
        warm.push_back(now_ms() - s);
    }
    const double cold_ms  = now_ms() - t0;
    const double rss_warm = status_mib("VmRSS:");
    std::vector<double> times;
    const double cpu0 = process_cpu_ms();
    for (int r = 0; r < runs; ++r) {
        const double s = now_ms();
        eng->forward(px.data(), outs);
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
    std::printf("  cold start (engine_create %.0f ms + 2 warm-up forwards) %.0f ms\n", load_ms, cold_ms);
    std::printf("  RSS after warm-up %.1f MiB, peak %.1f MiB\n", rss_warm, res["engine"]["vmhwm_peak_MiB"].get<double>());
    std::printf("  max-abs vs golden: logits %.3g, pred_boxes %.3g\n", res["engine"]["maxabs_logits"].get<double>(),
                res["engine"]["maxabs_pred_boxes"].get<double>());

    // Phase 3: rounds. Each measures the engine's CPU time per forward on one thread (getrusage around
    // `runs` forwards), ORT's and OpenVINO's the same way, then the wall median of `runs` forwards at the
    // engine's thread count for the three. Interleaving makes a change in the machine's load hit every
    // contender alike; the per-round ratios pair measurements taken seconds apart.
    const bool peers_ok = with_peers && exists(peers + "/rfdetr_base_seed1.onnx") && exists(peers_src + "/bench.js");
    const bool ov_ok    = peers_ok && exists(peers + "/venv/bin/python") && exists(peers_src + "/ov_bench.py");
    if (with_peers && !peers_ok) {
        std::printf("peers: not prepared (looked for %s/rfdetr_base_seed1.onnx and %s/bench.js); prepare them with\n"
                    "  PEERS_DIR=%s bash %s/prepare.sh   (minutes; downloads torch and OpenVINO)\n",
                    peers.c_str(), peers_src.c_str(), peers.c_str(), peers_src.c_str());
        res["peers"] = "not prepared";
    }
    const std::string env  = "PEERS_DIR='" + peers + "' ";
    const std::string onnx = "'" + peers + "/rfdetr_base_seed1.onnx' '" + input + "'";
    std::map<std::string, std::vector<double>> series;  // name -> one value per round
    std::map<std::string, nlohmann::json>      last;    // name -> the peer's last JSON line
    {
        auto               ckpt1 = rfdetr::checkpoint::open(weights);
        rfdetr::cpu::model m1(*ckpt1, 1);
        auto               engn = rfdetr::cpu_engine_create(weights, opts);
        m1.forward(px.data(), logits.data(), boxes.data());
        engn->forward(px.data(), outs);
        auto peer = [&](const std::string & name, const std::string & cmd, const char * key) {
            auto j = run_peer(cmd);
            if (j.is_object() && j.contains(key)) {
                series[name].push_back(j[key].get<double>());
                last[name] = j;
            }
        };
        for (int r = 0; r < rounds; ++r) {
            const double c0 = process_cpu_ms();
            for (int i = 0; i < runs; ++i) m1.forward(px.data(), logits.data(), boxes.data());
            series["engine_cpu_1t"].push_back((process_cpu_ms() - c0) / runs);
            if (peers_ok) {
                peer("ort_cpu_1t", env + "node '" + std::string(RFDETR_REPO_ROOT_DIR) + "/bench/engine/ort-cpu.cjs' 1 " +
                                       std::to_string(runs) + " '" + input + "'", "cpu_ms_per_forward");
            }
            if (ov_ok) peer("ov_cpu_1t", env + "'" + peers + "/venv/bin/python' '" + peers_src + "/ov_bench.py' 1 " + onnx, "cpu_ms_per_forward");
            std::vector<double> t;
            for (int i = 0; i < runs; ++i) {
                const double s0 = now_ms();
                engn->forward(px.data(), outs);
                t.push_back(now_ms() - s0);
            }
            series["engine_wall"].push_back(median(t));
            const std::string nt = std::to_string(nthreads);
            if (peers_ok) peer("ort_wall", env + "node '" + peers_src + "/bench.js' " + nt + " " + onnx, "median_ms");
            if (ov_ok) peer("ov_wall", env + "'" + peers + "/venv/bin/python' '" + peers_src + "/ov_bench.py' " + nt + " " + onnx, "median_ms");
            std::printf("round %d/%d:", r + 1, rounds);
            for (const auto & [k, v] : series) std::printf(" %s %.1f", k.c_str(), v.back());
            std::printf("\n");
        }
    }
    for (const auto & [k, v] : series) {
        const spread sp = summarize(v);
        res["rounds"][k] = {{"values", v}, {"median", sp.median}, {"min", sp.min}, {"max", sp.max}};
    }
    for (const auto & [k, j] : last) res["peers"][k] = j;
    res["engine"]["cpu_ms_per_forward_1_thread"] = summarize(series["engine_cpu_1t"]).median;
    // Per-round ratios engine / peer (< 1: the engine is faster), their median and range.
    auto ratio = [&](const std::string & eng_key, const std::string & peer_key, const char * label) {
        const auto & e = series[eng_key];
        const auto & p = series[peer_key];
        if (p.size() != e.size() || e.empty()) return;
        std::vector<double> q;
        for (size_t i = 0; i < e.size(); ++i) q.push_back(e[i] / p[i]);
        const spread sp = summarize(q);
        res["ratios"][std::string("engine_over_") + peer_key] = {{"per_round", q}, {"median", sp.median}, {"min", sp.min}, {"max", sp.max}};
        std::printf("  %-38s engine/peer %.3f (rounds %.3f-%.3f)\n", label, sp.median, sp.min, sp.max);
    };
    std::printf("same-run rounds (%d), medians [min-max]:\n", rounds);
    for (const auto & [k, v] : series) {
        const spread sp = summarize(v);
        std::printf("  %-14s %8.1f ms [%.1f-%.1f]\n", k.c_str(), sp.median, sp.min, sp.max);
    }
    ratio("engine_cpu_1t", "ort_cpu_1t", "CPU time/forward, 1 thread, vs ORT:");
    ratio("engine_cpu_1t", "ov_cpu_1t", "CPU time/forward, 1 thread, vs OpenVINO:");
    ratio("engine_wall", "ort_wall", "wall median, engine threads, vs ORT:");
    ratio("engine_wall", "ov_wall", "wall median, engine threads, vs OpenVINO:");
    for (const char * k : {"ort_wall", "ov_wall"}) {
        if (last.count(k)) std::printf("  %s: max-abs logits vs golden %.3g\n", k, last[k].value("maxabs_logits", NAN));
    }
    if (peers_ok && with_torch) {
        auto trc = run_peer(env + "OPENBLAS_NUM_THREADS=" + std::to_string(nthreads) + " /usr/bin/python3 '" +
                            peers_src + "/torch_bench.py' 1");
        res["peers"]["torch_eager"] = trc;
        if (trc.is_object() && trc.contains("median_ms")) {
            const double t = trc["median_ms"].get<double>();
            std::printf("torch eager (1 torch thread, BLAS %d): median %.1f ms (engine %.1f ms in phase 1)\n", nthreads, t, med);
        }
    }
    std::ofstream(out_path) << res.dump(2) << "\n";
    std::printf("results written to %s\n", out_path.c_str());
    return 0;
}
