// rfdetr-accuracy: a reduced precision of the CPU engine against its fp32, with fp32's proposal order held
// (issue 34's gates; `rfdetr verify --engine cpu --precision P` runs it and applies them). Per fixture input
// (a golden.safetensors holding `pixel_values`): the fp32 forward, then the forward at --precision on its own
// proposals (end to end) and again with fp32's top-k proposal indices injected (cpu::model::set_topk_override,
// as sidecar/tests/cpu/int8-accuracy-test.cpp does). The decoder's queries are the proposals in rank order, so
// on near-tied scores one swap moves whole output rows: held order separates the arithmetic's error from the
// reordering. Prints one JSON object on stdout:
//   {"tool":"rfdetr-accuracy","precision":P,"threads":N,"kernels":..., "cases":[{"case":NAME,
//     "topk_same_set":n,"topk_same_rank":n,"queries":Q,
//     "end_to_end":{"top100_vs_fp32":n,"logits_pcc":x,...},"held_order":{"top100_vs_fp32":n,"logits_pcc":x,...}}]}
// top-100: the overlap of the 100 highest flattened logits (../shared/peers/int8_peers.py's `top100`).
//   rfdetr-accuracy --weights DIR --precision P [--threads N] (--fixtures DIR | --golden FILE)...
// --fixtures DIR takes DIR/*/golden.safetensors in name order (the case is the subdirectory's name).
// Exit 2: a usage error; 1: a failure (message on stderr). Output: sidecar/build/rfdetr-accuracy.
#include "common/error.h"
#include "engines/cpu/cpu-model.h"
#include "engines/cpu/gemm.h"
#include "engines/cpu/isa-level.h"
#include "engines/cpu/qgemm.h"
#include "golden-file.h"
#include "output-compare.h"
#include "model/checkpoint.h"
#include "engines/cpu/bgemm.h"
#include "engines/cpu/precision.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <dirent.h>
#include <exception>
#include <memory>
#include <set>
#include <string>
#include <sys/stat.h>
#include <utility>
#include <vector>

namespace {

namespace cpu = rfdetr::cpu;

using rfdetr::test::max_abs;
using rfdetr::test::pcc;
using rfdetr::test::top100_overlap;

// The reduced precisions this tool builds a cpu::model for (fp32 is the reference), and the model at one of
// them: bf16 only where a bf16 kernel runs.
const std::vector<std::string> k_precisions = {"int8", "bf16"};

std::unique_ptr<cpu::model> make_model(const rfdetr::checkpoint & ck, int threads, const std::string & name) {
    cpu::precision p = cpu::precision::fp32;
    if (!cpu::precision_from_string(name, p)) throw rfdetr::error("no cpu precision named \"" + name + "\"");
    if (std::string missing; p == cpu::precision::bf16 && !cpu::bf16_supported(missing)) {
        throw rfdetr::error("--precision bf16 needs " + missing + "; this CPU runs int8 and fp32");
    }
    return std::make_unique<cpu::model>(ck, threads, p);
}

std::string kernels(const std::string & name) {
    if (name == "bf16") return std::string(cpu::gemm_isa()) + "+bf16-" + cpu::bgemm_isa();
    return std::string(cpu::gemm_isa()) + (name == "int8" ? std::string("+") + cpu::qgemm_isa() : "");
}

nlohmann::json num(double x) { return std::isfinite(x) ? nlohmann::json(x) : nlohmann::json(nullptr); }

struct outputs {
    std::vector<float> logits, boxes;
};

nlohmann::json compare(const outputs & got, const outputs & ref) {
    return {{"top100_vs_fp32", top100_overlap(got.logits, ref.logits)},
            {"logits_pcc", num(pcc(got.logits, ref.logits))},
            {"logits_max_abs", num(max_abs(got.logits, ref.logits))},
            {"boxes_pcc", num(pcc(got.boxes, ref.boxes))},
            {"boxes_max_abs", num(max_abs(got.boxes, ref.boxes))}};
}

// The subdirectories of `dir` holding a golden.safetensors, in name order, as (case, file).
std::vector<std::pair<std::string, std::string>> fixture_cases(const std::string & dir) {
    std::vector<std::pair<std::string, std::string>> out;
    DIR *                                            d = opendir(dir.c_str());
    if (d == nullptr) throw rfdetr::error("--fixtures " + dir + ": cannot open the directory; expected one holding case-*/golden.safetensors");
    while (const dirent * e = readdir(d)) {
        const std::string name = e->d_name, file = dir + "/" + name + "/golden.safetensors";
        struct stat       st{};
        if (name[0] != '.' && stat(file.c_str(), &st) == 0 && S_ISREG(st.st_mode)) out.emplace_back(name, file);
    }
    closedir(d);
    std::sort(out.begin(), out.end());
    if (out.empty()) throw rfdetr::error("--fixtures " + dir + ": no */golden.safetensors in it; expected e.g. test/fixtures/rfdetr-synth");
    return out;
}

int usage(const std::string & why) {
    std::fprintf(stderr,
                 "rfdetr-accuracy: %s\nusage: rfdetr-accuracy --weights DIR --precision P [--threads N] (--fixtures DIR | --golden FILE)...\n"
                 "  P: a reduced precision of the cpu model in this build (",
                 why.c_str());
    for (size_t i = 0; i < k_precisions.size(); ++i) std::fprintf(stderr, "%s%s", i ? ", " : "", k_precisions[i].c_str());
    std::fprintf(stderr, "); each input is a golden.safetensors with pixel_values [1,3,S,S]\n");
    return 2;
}

}  // namespace

int main(int argc, char ** argv) {
    std::string                                      weights, precision;
    int                                              threads = 1;
    std::vector<std::pair<std::string, std::string>> inputs;
    std::vector<std::string>                         fixture_dirs;
    for (int i = 1; i < argc; ++i) {
        const std::string a = argv[i];
        if (a == "--help" || a == "-h") return usage("the held-order accuracy of a reduced cpu precision, as JSON"), 0;
        if (i + 1 >= argc) return usage(a + " needs a value");
        const std::string v = argv[++i];
        if (a == "--weights") weights = v;
        else if (a == "--precision") precision = v;
        else if (a == "--threads") {
            char * end = nullptr;
            const long n = std::strtol(v.c_str(), &end, 10);
            if (*end != '\0' || n < 0 || n > 1024) return usage("--threads: expected 0 (physical cores) to 1024, got \"" + v + "\"");
            threads = static_cast<int>(n);
        } else if (a == "--fixtures") fixture_dirs.push_back(v);
        else if (a == "--golden") inputs.emplace_back(v, v);
        else return usage("unknown argument " + a);
    }
    if (weights.empty()) return usage("--weights DIR is required");
    if (std::find(k_precisions.begin(), k_precisions.end(), precision) == k_precisions.end()) {
        return usage("--precision \"" + precision + "\" is not a reduced precision this build's cpu model runs");
    }
    try {
        for (const auto & d : fixture_dirs) {
            for (auto & c : fixture_cases(d)) inputs.push_back(std::move(c));
        }
        if (inputs.empty()) return usage("no inputs: pass --fixtures DIR or --golden FILE");
        if (const char * cap = std::getenv("RFDETR_CPU_ISA"); cap && *cap) {
            if (const std::string err = cpu::select_isa_level(cap); !err.empty()) throw rfdetr::error(err);
        }
        auto       ck   = rfdetr::checkpoint::open(weights);
        auto       ref  = make_model(*ck, threads, "fp32");
        auto       red  = make_model(*ck, threads, precision);
        const int  Q    = ref->dims().queries, C = ref->num_classes(), S = ref->dims().input;
        nlohmann::json cases = nlohmann::json::array();
        for (const auto & [name, file] : inputs) {
            const auto g  = rfdetr::test::read_golden(file);
            const auto px = g.find("pixel_values");
            if (px == g.end() || px->second.f32.size() != static_cast<size_t>(3) * S * S) {
                throw rfdetr::error(file + ": expected an F32 pixel_values of 3x" + std::to_string(S) + "x" + std::to_string(S) +
                                    " (this checkpoint's input); pass the fixtures made for its variant");
            }
            auto run = [&](cpu::model & m) {
                outputs o{std::vector<float>(static_cast<size_t>(Q) * C), std::vector<float>(static_cast<size_t>(Q) * 4)};
                m.forward(px->second.f32.data(), o.logits.data(), o.boxes.data());
                return o;
            };
            red->set_topk_override(nullptr);
            const outputs f32 = run(*ref);
            const std::vector<int32_t> order(ref->topk_indices(), ref->topk_indices() + Q);
            const outputs own = run(*red);
            const std::vector<int32_t> own_order(red->topk_indices(), red->topk_indices() + Q);
            red->set_topk_override(order.data());
            const outputs held = run(*red);
            red->set_topk_override(nullptr);
            const std::set<int32_t> so(own_order.begin(), own_order.end()), sr(order.begin(), order.end());
            size_t same_rank = 0, same_set = 0;
            for (int q = 0; q < Q; ++q) same_rank += own_order[q] == order[q];
            for (int32_t i : so) same_set += sr.count(i);
            cases.push_back({{"case", name},
                             {"queries", Q},
                             {"topk_same_set", same_set},
                             {"topk_same_rank", same_rank},
                             {"end_to_end", compare(own, f32)},
                             {"held_order", compare(held, f32)}});
        }
        const nlohmann::json out = {
            {"tool", "rfdetr-accuracy"},
            {"precision", precision},
            {"threads", red->threads()},
            {"kernels", kernels(precision)},
            {"variant", ck->variant().variant},
            {"cases", cases},
        };
        std::printf("%s\n", out.dump().c_str());
        return 0;
    } catch (const std::exception & e) {
        std::fprintf(stderr, "rfdetr-accuracy: %s\n", e.what());
        return 1;
    }
}
