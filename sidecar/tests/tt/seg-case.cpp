#include "seg-case.h"

#include <sys/stat.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <iterator>
#include <fstream>
#include <stdexcept>

namespace rfdetr::test {

namespace {

bool exists(const std::string & p) {
    struct stat st;
    return ::stat(p.c_str(), &st) == 0;
}

}  // namespace

std::string seg_weights_dir(const std::string & size) {
    return family_weights_dir("seg-" + size);
}

std::string seg_missing(const std::string & size) {
    const std::string fix = seg_fixtures_dir();
    if (fix.empty()) return "no ../shared/fixtures/rfdetr-seg (set RFDETR_SEG_FIXTURES)";
    if (!exists(fix + "/" + size + "/case-1/golden.safetensors")) return "no " + fix + "/" + size + "/case-1/golden.safetensors";
    if (!exists(seg_weights_dir(size) + "/model.safetensors")) return "no " + seg_weights_dir(size) + " (run the synth_seg ctest fixture)";
    return "";
}

seg_case seg_load(const std::string & size) {
    const std::string d = seg_fixtures_dir() + "/" + size + "/case-1";
    seg_case          c;
    c.variant = size;
    c.weights = seg_weights_dir(size);
    c.golden  = read_golden(d + "/golden.safetensors");
    std::ifstream f(d + "/detections.json");
    if (!f) throw std::runtime_error("seg_load: cannot open " + d + "/detections.json");
    // Python's json writes non-finite margins as bare Infinity / NaN, which JSON (and nlohmann) rejects: as null.
    std::string text((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
    for (const char * lit : { "-Infinity", "Infinity", "NaN" }) {
        for (size_t at; (at = text.find(std::string(": ") + lit)) != std::string::npos;) {
            text.replace(at + 2, std::strlen(lit), "null");
        }
    }
    c.detections = nlohmann::json::parse(text);
    return c;
}

bool seg_topk_swaps_are_near_ties(const std::vector<int64_t> & ours, const seg_case & c) {
    const auto &   ref = c.golden.at("two_stage.topk_indices").i64;
    nlohmann::json pairs;
    for (const auto & [k, v] : c.detections.at("two_stage_topk").items()) {
        if (k.rfind("near_tie_pairs_top", 0) == 0) pairs = v;
    }
    for (size_t i = 0; i < ref.size() && i < ours.size(); ++i) {
        if (ours[i] == ref[i]) continue;
        bool listed = false;
        for (const auto & p : pairs) {
            const size_t r = p.at("rank").get<size_t>();
            listed         = listed || i == r || i == r + 1;
        }
        if (!listed) return false;
    }
    return ours.size() == ref.size();
}

std::vector<int> seg_mask_rows(const seg_case & c) {
    std::vector<int> rows;
    if (c.golden.count("pred_masks")) {
        for (int64_t q = 0; q < c.golden.at("pred_masks").shape[1]; ++q) rows.push_back((int)q);
    } else {
        for (int64_t q : c.golden.at("pred_masks_sel_queries").i64) rows.push_back((int)q);
    }
    return rows;
}

std::vector<float> seg_mask_planes(const seg_case & c, const std::vector<int> & rows) {
    const bool         full  = c.golden.count("pred_masks") > 0;
    const auto &       g     = c.golden.at(full ? "pred_masks" : "pred_masks_sel");
    const size_t       plane = (size_t)(g.shape[2] * g.shape[3]);
    std::vector<float> out;
    for (size_t i = 0; i < rows.size(); ++i) {
        const size_t at = full ? (size_t)rows[i] : i;
        out.insert(out.end(), g.f32.begin() + at * plane, g.f32.begin() + (at + 1) * plane);
    }
    return out;
}

std::vector<int> seg_detection_queries(const seg_case & c, const std::string & thr) {
    std::vector<int> q;
    for (const auto & d : c.detections.at("detections").at(thr)) q.push_back(d.at("query").get<int>());
    return q;
}

namespace {

// COCO uncompressed RLE (column-major, starting with a run of 0s) -> H*W row-major booleans.
std::vector<bool> rle_decode(const nlohmann::json & rle, int & H, int & W) {
    H = rle.at("size")[0].get<int>();
    W = rle.at("size")[1].get<int>();
    std::vector<bool> m((size_t)H * W, false);
    size_t            at = 0;
    bool              v  = false;
    for (const auto & n : rle.at("counts")) {
        for (size_t i = 0; i < n.get<size_t>(); ++i, ++at) {
            if (v) m[(at % H) * W + at / H] = true;
        }
        v = !v;
    }
    if (at != (size_t)H * W) throw std::runtime_error("rle_decode: counts cover " + std::to_string(at) + " pixels, not H*W");
    return m;
}

struct taps1 {
    std::vector<int>    i0, i1;
    std::vector<double> l;
};
taps1 axis(int in, int out) {
    taps1 t;
    for (int o = 0; o < out; ++o) {
        double src = std::max((o + 0.5) * in / out - 0.5, 0.0);
        int    i0  = std::min((int)src, in - 1);
        t.i0.push_back(i0);
        t.i1.push_back(std::min(i0 + 1, in - 1));
        t.l.push_back(src - i0);
    }
    return t;
}

}  // namespace

seg_image_masks seg_compare_image_masks(const seg_case & c, const std::string & thr, const std::vector<float> & planes, int M) {
    seg_image_masks r;
    const auto &    dets = c.detections.at("detections").at(thr);
    double          sum  = 0;
    for (size_t k = 0; k < dets.size(); ++k) {
        int        H, W, h2, w2;
        const auto gold = rle_decode(dets[k].at("mask"), H, W);
        const auto near = rle_decode(dets[k].at("mask_near_zero").at("pixels"), h2, w2);
        const auto ty = axis(M, H), tx = axis(M, W);
        const float * p = planes.data() + k * (size_t)M * M;
        size_t        inter = 0, uni = 0;
        for (int y = 0; y < H; ++y) {
            for (int x = 0; x < W; ++x) {
                auto   at = [&](int i, int j) { return (double)p[(size_t)i * M + j]; };
                double ly = ty.l[y], lx = tx.l[x];
                double v  = (1 - ly) * ((1 - lx) * at(ty.i0[y], tx.i0[x]) + lx * at(ty.i0[y], tx.i1[x])) +
                           ly * ((1 - lx) * at(ty.i1[y], tx.i0[x]) + lx * at(ty.i1[y], tx.i1[x]));
                const size_t i = (size_t)y * W + x;
                if (near[i]) continue;
                const bool o = v > 0, g = gold[i];
                r.differing += o != g;
                inter += o && g;
                uni += o || g;
            }
        }
        const double iou = uni ? (double)inter / uni : 1.0;
        sum += iou;
        r.iou_min = std::min(r.iou_min, iou);
    }
    r.detections = dets.size();
    r.iou_mean   = dets.empty() ? 1.0 : sum / dets.size();
    return r;
}

}  // namespace rfdetr::test
