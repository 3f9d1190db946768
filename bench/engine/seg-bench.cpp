// The CPU engine's RF-DETR Seg cost (not a test): for each checkpoint given, 1 thread, the forward (backbone to
// heads) and, on a Seg checkpoint, the mask head split into its query-independent spatial part and the query
// part (MLP, projection, mask product) for --rows rows; process CPU time per call, medians over --runs calls
// in --rounds rounds that interleave the checkpoints (so a detection size and a Seg size see the same machine
// load). One JSON line per checkpoint. The input is a fixed pattern: the cost does not depend on the pixels.
//   seg-bench --weights DIR [--weights DIR ...] [--rows N ...] [--runs N] [--rounds N] [--precision fp32|int8|bf16]
#include "engines/cpu/bgemm.h"
#include "engines/cpu/cpu-model.h"
#include "engines/cpu/gemm.h"
#include "engines/cpu/qgemm.h"
#include "model/checkpoint.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <map>
#include <memory>
#include <numeric>
#include <string>
#include <vector>

namespace {

double cpu_ms() {
    timespec ts{};
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

double median(std::vector<double> v) {
    std::sort(v.begin(), v.end());
    const size_t n = v.size();
    return n == 0 ? NAN : n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

double r1(double x) { return std::round(x * 10) / 10; }

struct subject {
    std::string                         dir;
    std::unique_ptr<rfdetr::checkpoint> ckpt;
    std::unique_ptr<rfdetr::cpu::model> m;
    std::vector<float>                  px, logits, boxes, masks;
    std::vector<double>                 forward;
    double                              load_ms = 0;
    std::vector<double>                 spatial;
    std::map<int, std::vector<double>>  query;  // rows -> ms
};

}  // namespace

int main(int argc, char ** argv) {
    std::vector<std::string> dirs;
    std::vector<int>         rows;
    int                      runs = 3, rounds = 3;
    std::string              precision = "fp32";
    rfdetr::cpu::precision prec = rfdetr::cpu::precision::fp32;
    for (int i = 1; i < argc; ++i) {
        const std::string a = argv[i];
        if (i + 1 >= argc) {
            std::fprintf(stderr, "seg-bench: %s needs a value\n", a.c_str());
            return 2;
        }
        const std::string v = argv[++i];
        if (a == "--weights") dirs.push_back(v);
        else if (a == "--rows") rows.push_back(std::max(0, std::atoi(v.c_str())));
        else if (a == "--runs") runs = std::max(1, std::atoi(v.c_str()));
        else if (a == "--rounds") rounds = std::max(1, std::atoi(v.c_str()));
        else if (a == "--precision") precision = v;
        else {
            std::fprintf(stderr, "seg-bench: unknown argument %s (see the header of seg-bench.cpp)\n", a.c_str());
            return 2;
        }
    }
    if (dirs.empty() || !rfdetr::cpu::precision_from_string(precision, prec)) {
        std::fprintf(stderr, "usage: seg-bench --weights DIR [--weights DIR ...] [--rows N ...] [--runs N] [--rounds N] [--precision fp32|int8|bf16]\n");
        return 2;
    }
    if (std::string missing; prec == rfdetr::cpu::precision::bf16 && !rfdetr::cpu::bf16_supported(missing)) {
        std::fprintf(stderr, "seg-bench: --precision bf16 needs %s\n", missing.c_str());
        return 2;
    }
    std::vector<subject> subs(dirs.size());
    for (size_t s = 0; s < dirs.size(); ++s) {
        auto & x = subs[s];
        x.dir    = dirs[s];
        x.ckpt   = rfdetr::checkpoint::open(x.dir);
        const double t0 = cpu_ms();
        x.m      = std::make_unique<rfdetr::cpu::model>(*x.ckpt, 1, prec);
        x.load_ms = cpu_ms() - t0;
        const auto & d = x.m->dims();
        x.px.resize(static_cast<size_t>(3) * d.input * d.input);
        for (size_t i = 0; i < x.px.size(); ++i) x.px[i] = std::sin(0.001f * static_cast<float>(i)) * 2.0f;
        x.logits.resize(static_cast<size_t>(d.queries) * x.m->num_classes());
        x.boxes.resize(static_cast<size_t>(d.queries) * 4);
        x.masks.resize(static_cast<size_t>(d.queries) * d.mask_side * d.mask_side);
        x.m->forward(x.px.data(), x.logits.data(), x.boxes.data());  // warm-up
    }
    for (int r = 0; r < rounds; ++r) {
        for (auto & x : subs) {
            for (int i = 0; i < runs; ++i) {
                double t = cpu_ms();
                x.m->forward(x.px.data(), x.logits.data(), x.boxes.data());
                x.forward.push_back(cpu_ms() - t);
                auto * head = x.m->mask_head();
                if (!head) continue;
                t = cpu_ms();
                head->spatial(x.m->memory());
                x.spatial.push_back(cpu_ms() - t);
                const int q = x.m->dims().queries;
                std::vector<int> ks = rows.empty() ? std::vector<int>{q} : rows;
                for (int k : ks) {
                    k = std::min(k, q);
                    std::vector<uint32_t> sel(k);
                    std::iota(sel.begin(), sel.end(), 0);
                    t = cpu_ms();
                    head->masks(x.m->hs(), sel.data(), k, x.masks.data());
                    x.query[k].push_back(cpu_ms() - t);
                }
            }
        }
    }
    for (const auto & x : subs) {
        const auto &   d = x.m->dims();
        nlohmann::json j = {
            {"weights", x.dir},
            {"variant", x.ckpt->variant().variant},
            {"precision", precision},
            {"kernels", std::string(rfdetr::cpu::gemm_isa()) + (prec == rfdetr::cpu::precision::int8   ? std::string("+") + rfdetr::cpu::qgemm_isa()
                         : prec == rfdetr::cpu::precision::bf16 ? std::string("+bf16-") + rfdetr::cpu::bgemm_isa()
                                                                : std::string())},
            {"threads", 1},
            {"input", d.input},
            {"tokens", d.tokens},
            {"queries", d.queries},
            {"decoder_layers", d.dec_layers},
            {"calls", x.forward.size()},
            {"forward_cpu_ms", r1(median(x.forward))},
            {"forward_cpu_ms_min", r1(*std::min_element(x.forward.begin(), x.forward.end()))},
        };
        if (!x.spatial.empty()) {
            j["mask_side"]            = d.mask_side;
            j["head_spatial_cpu_ms"] = r1(median(x.spatial));
            nlohmann::json q         = nlohmann::json::object();
            for (const auto & [k, v] : x.query) q[std::to_string(k)] = r1(median(v));
            j["head_query_cpu_ms_by_rows"] = q;
        }
        std::printf("%s\n", j.dump().c_str());
    }
    return 0;
}
