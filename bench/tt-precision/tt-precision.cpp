// The precision study behind the TT engine's default plan (not a test): every named plan (tt_plan_names) on
// the host bf16 model of the device, on the three repo fixtures and the seed-1 synthetic checkpoint. Per plan:
// the mean detection-IoU at 0.5 against the fixtures' detections with the plan's own top-k and with the
// reference's top-k injected, the top-k ranks that differ over the three cases, and case-2's per-stage RMS
// error against the shared goldens (when present). Prints a table and writes it as JSON.
//   tt-precision --weights DIR [--plans a,b,...] [--shared DIR] [--out FILE]
#include "detections.h"
#include "engines/tt/tt-graph.h"
#include "engines/tt/tt-runner.h"
#include "golden-file.h"
#include "model/checkpoint.h"

#include <nlohmann/json.hpp>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <map>
#include <string>
#include <sys/stat.h>
#include <vector>

namespace {

using rfdetr::test::golden_tensor;

struct fixture_case {
    std::string                          name;
    std::map<std::string, golden_tensor> golden;  // pixel_values, logits, pred_boxes, two_stage.topk_indices
    nlohmann::json                       detections;
};

bool exists(const std::string & p) {
    struct stat st;
    return ::stat(p.c_str(), &st) == 0;
}

// [1, C, H*W] channels-first golden -> [H*W, C] channels-last, the layout of the graph's taps.
std::vector<float> channels_last(const std::vector<float> & cf, int C, int HW) {
    std::vector<float> cl((size_t)C * HW);
    for (int c = 0; c < C; ++c) {
        for (int i = 0; i < HW; ++i) cl[(size_t)i * C + c] = cf[(size_t)c * HW + i];
    }
    return cl;
}

std::vector<std::string> split(const std::string & s) {
    std::vector<std::string> out;
    for (size_t at = 0; at <= s.size();) {
        const size_t comma = s.find(',', at);
        out.push_back(s.substr(at, comma == std::string::npos ? std::string::npos : comma - at));
        at = comma == std::string::npos ? s.size() + 1 : comma + 1;
    }
    return out;
}

int usage(const char * why) {
    std::fprintf(stderr, "tt-precision: %s\nusage: tt-precision --weights DIR [--plans a,b] [--shared DIR] [--out FILE]\n", why);
    return 2;
}

}  // namespace

int main(int argc, char ** argv) {
    std::string              weights, shared = rfdetr::test::shared_fixtures_dir(), out = "results.json";
    std::vector<std::string> plans = rfdetr::tt::tt_plan_names();
    for (int i = 1; i < argc; ++i) {
        const std::string a = argv[i];
        if (i + 1 >= argc) return usage(("missing the value of " + a).c_str());
        const std::string v = argv[++i];
        if (a == "--weights") weights = v;
        else if (a == "--plans") plans = split(v);
        else if (a == "--shared") shared = v;
        else if (a == "--out") out = v;
        else return usage(("unknown flag " + a).c_str());
    }
    if (weights.empty() || !exists(weights + "/model.safetensors")) return usage("--weights DIR with model.safetensors is required");

    std::vector<fixture_case> cases;
    for (int i = 1; i <= 3; ++i) {
        fixture_case c;
        c.name   = "case-" + std::to_string(i);
        const std::string dir = rfdetr::test::repo_fixtures_dir() + "/" + c.name;
        c.golden = rfdetr::test::read_golden(dir + "/golden.safetensors");
        std::ifstream f(dir + "/detections.json");
        c.detections = nlohmann::json::parse(f);
        cases.push_back(std::move(c));
    }
    const std::string case2 = shared + "/case-2/golden.safetensors";
    const auto        g2    = !shared.empty() && exists(case2) ? rfdetr::test::read_golden(case2) : std::map<std::string, golden_tensor>();
    if (g2.empty()) std::fprintf(stderr, "tt-precision: no shared goldens at %s; per-stage errors are left out\n", case2.c_str());

    const auto     ck = rfdetr::checkpoint::open(weights);
    nlohmann::json rows = nlohmann::json::array();
    for (const auto & name : plans) {
        const auto          t0 = std::chrono::steady_clock::now();
        rfdetr::tt::tt_runner r(rfdetr::tt::tt_ops_host_create("bf16", 1), *ck, false, rfdetr::tt::tt_plan_named(name));
        double              iou[2]   = {0, 0};
        size_t              ranks[2] = {0, 0};
        nlohmann::json      stages   = nlohmann::json::object();
        for (int injected = 0; injected < 2; ++injected) {
            for (const auto & c : cases) {
                const auto &     gi = c.golden.at("two_stage.topk_indices").i64;
                r.set_topk_override(injected ? std::vector<int>(gi.begin(), gi.end()) : std::vector<int>());
                std::vector<float> logits((size_t)300 * r.num_classes()), boxes((size_t)300 * 4);
                r.forward(c.golden.at("pixel_values").f32.data(), logits.data(), boxes.data());
                const auto ours = rfdetr::test::postprocess(logits, boxes, r.num_classes(), 0.5f,
                                                            c.detections["image"]["width"].get<float>(),
                                                            c.detections["image"]["height"].get<float>());
                iou[injected] += rfdetr::test::detection_iou(ours, c.detections["detections"]["0.5"]) / 3.0;
                const auto topk = r.read_tap("two_stage.topk_indices");
                for (size_t k = 0; k < gi.size(); ++k) ranks[injected] += (int64_t)topk[k] != gi[k];
                if (!injected || c.name != "case-2" || g2.empty()) continue;
                for (const char * st : {"backbone.feature_map.0", "backbone.feature_map.3", "projector.out",
                                        "two_stage.enc_class_logits", "decoder.hs_last"}) {
                    const auto   got  = r.read_tap(st);
                    const auto & ref  = g2.at(st).f32;
                    const int    C    = std::strncmp(st, "backbone", 8) == 0 ? 384 : std::strcmp(st, "projector.out") == 0 ? 256 : 0;
                    const auto   want = C ? channels_last(ref, C, 1600) : ref;
                    double       se   = 0;
                    for (size_t i = 0; i < want.size(); ++i) se += ((double)got[i] - want[i]) * ((double)got[i] - want[i]);
                    stages[st] = std::sqrt(se / (double)want.size());
                }
            }
        }
        const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        std::printf("plan %-22s detection-IoU %6.2f (own top-k, %zu of 900 ranks differ) | %6.2f (reference top-k) | %.0f s\n",
                    name.c_str(), iou[0], ranks[0], iou[1], s);
        rows.push_back({{"plan", name}, {"detection_iou_own_topk", iou[0]}, {"detection_iou_reference_topk", iou[1]},
                        {"topk_ranks_differing", ranks[0]}, {"case2_stage_rms", stages}, {"seconds", s}});
    }
    std::ofstream f(out);
    f << nlohmann::json({{"weights", "seed-1 synthetic"}, {"threshold", 0.5}, {"cases", 3}, {"plans", rows}}).dump(2) << "\n";
    std::printf("tt-precision: wrote %s\n", out.c_str());
    return 0;
}
