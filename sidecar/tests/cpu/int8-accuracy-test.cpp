// The int8 precision of the CPU engine against fp32, on the three Base fixture cases and the four
// single-level family sizes. The decoder's queries are the two-stage's top-300 in rank order, and each
// rank has its own learned query embedding, so a swap of two near-tied proposal scores changes whole output
// rows: on these synthetic checkpoints any weight rounding (even 13-bit per channel, measured) reorders
// most ranks. So the gates separate the two: the int8 two-stage must select >= 270 of fp32's 300 proposals,
// and with fp32's top-k order injected (issue 34's gates) the top-100 flattened logits
// (../shared/peers/int8_peers.py's measure) must share >= 95 with fp32's and the logits' PCC be >= 0.999.
// int8 runs its projector convs in bf16, or in fp32 on a CPU without bf16 (cpu-model.h, projector_precision):
// the cpu_int8_no_bf16 suites run that form here with the bf16 kernels switched off. The end-to-end overlap
// with the golden, max-abs and PCC per head are printed (README.md, "int8", has them), with loose max-abs
// bounds that only a broken path exceeds.
// The RF-DETR Seg sizes take the same gates (90 % of their 100/200 proposals) and, on fp32's queries scoring
// > 0.3 with fp32's top-k injected, their int8 masks (logit > 0 at R/4) against fp32's: mean IoU >= 0.95, min >= 0.8.
// Fixtures or checkpoints missing are skips (failures under RFDETR_REQUIRE_ALL=1).
#include "engines/cpu/attention-int8.h"
#include "engines/cpu/bgemm.h"
#include "engines/cpu/cpu-model.h"
#include "engines/cpu/gemm.h"
#include "engines/cpu/qgemm.h"
#include "family-case.h"
#include "golden-file.h"
#include "model/checkpoint.h"
#include "output-compare.h"
#include "skip.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <numeric>
#include <set>

namespace {

namespace cpu = rfdetr::cpu;
using rfdetr::test::max_abs;
using rfdetr::test::pcc;
using rfdetr::test::top100_overlap;

// The Seg gates (masks at R/4, logit > 0, int8 against fp32 on fp32's queries): see README.md, "int8".
constexpr double k_mask_iou_mean = 0.95, k_mask_iou_min = 0.8;

// Per query of `queries`, the IoU of (mask logit > 0) between two sets of mask rows [k, plane].
std::vector<double> mask_iou(const std::vector<float> & a, const std::vector<float> & b, size_t plane) {
    std::vector<double> iou;
    for (size_t r = 0; r * plane < a.size(); ++r) {
        size_t inter = 0, uni = 0;
        for (size_t i = r * plane; i < (r + 1) * plane; ++i) inter += a[i] > 0 && b[i] > 0, uni += a[i] > 0 || b[i] > 0;
        iou.push_back(uni ? (double)inter / uni : 1.0);
    }
    return iou;
}

// What a precision must keep of fp32's: the share of fp32's proposals its two-stage selects, and with fp32's
// top-k injected issue 34's gates, the top-100 overlap and the logits' PCC.
struct gates {
    double proposals;
    size_t top100;
    double pcc;
};
// bf16 measured (bf16 GEMMs and, on AMX, the bf16 attention): >= 98 % of the proposals, top-100 98-100, PCC >= 0.99994
// on every case below (README.md, "bf16", "Attention in bf16").
// int8 measured (README.md, "int8"): >= 96 % of the proposals; top-100 97-99 and PCC >= 0.99974 with 8-bit weights and
// the projector convs in bf16 or fp32 (Base case-2 0.99898 with 7-bit weights and the convs in int8); with the ViT's
// attention in int8 as well (no bf16 attention, AVX-512 VNNI): top-100 97-98, PCC >= 0.99967 on Base.
gates gates_of(cpu::precision p) { return p == cpu::precision::bf16 ? gates{0.95, 95, 0.999} : gates{0.9, 95, 0.999}; }

// One int8 (or bf16) forward against the golden's logits and boxes.
void check(const std::string & label, const std::string & weights, const std::map<std::string, rfdetr::test::golden_tensor> & g,
           cpu::precision p = cpu::precision::int8) {
    const char * pn = cpu::to_string(p);
    const gates  gt = gates_of(p);
    auto       ck = rfdetr::checkpoint::open(weights);
    cpu::model m(*ck, 0, p);
    ASSERT_EQ(m.prec(), p);
    ASSERT_EQ(m.projector_prec(), cpu::projector_precision(p));
    // The two-stage and final heads: bf16 at bf16, and at int8 wherever the projector runs bf16 (a bf16 kernel runs).
    ASSERT_EQ(m.heads_prec(), p == cpu::precision::int8 ? cpu::projector_precision(p) : p);
    // The ViT's attention runs in int8 exactly where int8 runs on AVX-512 VNNI (Intel without AMX, AMD's Zen 4).
    ASSERT_EQ(m.int8_attention(), p == cpu::precision::int8 && std::string(cpu::qgemm_isa()) == "avx512vnni" &&
                                      cpu::attention_int8_supported());
    const int          Q = m.dims().queries, C = m.num_classes();
    std::vector<float> logits((size_t)Q * C), boxes((size_t)Q * 4);
    m.forward(g.at("pixel_values").f32.data(), logits.data(), boxes.data());
    std::vector<int32_t> own(m.topk_indices(), m.topk_indices() + Q);
    {
        cpu::model f(*ck, 0, cpu::precision::fp32);
        std::vector<float> fl((size_t)Q * C), fb((size_t)Q * 4);
        f.forward(g.at("pixel_values").f32.data(), fl.data(), fb.data());
        std::vector<int32_t> ref(f.topk_indices(), f.topk_indices() + Q);
        size_t same = 0;
        for (int q = 0; q < Q; ++q) same += own[q] == ref[q];
        std::set<int32_t> so(own.begin(), own.end()), sr(ref.begin(), ref.end());
        size_t common = 0;
        for (int32_t i : so) common += sr.count(i);
        m.set_topk_override(ref.data());
        std::vector<float> il((size_t)Q * C), ib((size_t)Q * 4);
        m.forward(g.at("pixel_values").f32.data(), il.data(), ib.data());
        const size_t ov = top100_overlap(il, fl);
        EXPECT_GE(common, (size_t)(Q * gt.proposals)) << label << ": the " << pn << " two-stage selects other proposals";
        EXPECT_GE(ov, gt.top100) << label << " with the fp32 top-k injected";
        EXPECT_GE(pcc(il, fl), gt.pcc) << label << " logits with the fp32 top-k injected";
        std::printf("%s %-8s topk: same rank %zu/%d, same set %zu/%d; fp32 top-k injected: top100 %zu, logits max-abs %.3g pcc %.6f boxes max-abs %.3g\n",
                    pn, label.c_str(), same, Q, common, Q, ov, max_abs(il, fl), pcc(il, fl), max_abs(ib, fb));
        if (m.segmentation()) {
            // The masks of fp32's queries scoring > 0.3, int8 (fp32's top-k injected) against fp32, at R/4: measured
            // mean IoU 0.985-0.989, min 0.94-0.97 on the four sizes (0.965-0.978 and 0.85-0.92 with 7-bit weights and
            // the projector in int8; the same within 0.002 with the head in fp32: the backbone dominates). A broken
            // head gives ~0.5.
            std::vector<uint32_t> rows;
            for (int q = 0; q < Q; ++q) {
                if (*std::max_element(fl.begin() + (size_t)q * C, fl.begin() + (size_t)(q + 1) * C) > std::log(0.3 / 0.7)) rows.push_back(q);
            }
            ASSERT_FALSE(rows.empty()) << label;
            const size_t       plane = (size_t)m.dims().mask_side * m.dims().mask_side;
            std::vector<float> mi(rows.size() * plane), mf(rows.size() * plane);
            m.masks(rows.data(), (int)rows.size(), mi.data());
            f.masks(rows.data(), (int)rows.size(), mf.data());
            const auto   iou  = mask_iou(mi, mf, plane);
            const double mean = std::accumulate(iou.begin(), iou.end(), 0.0) / iou.size();
            const double low  = *std::min_element(iou.begin(), iou.end());
            std::printf("%s %-8s masks of %zu queries (fp32 > 0.3, fp32 top-k injected): IoU vs fp32 mean %.4f min %.4f, logits max-abs %.3g\n",
                        pn, label.c_str(), rows.size(), mean, low, max_abs(mi, mf));
            EXPECT_GE(mean, k_mask_iou_mean) << label;
            EXPECT_GE(low, k_mask_iou_min) << label;
        }
    }
    const auto & gl = g.at("logits").f32;
    const auto & gb = g.at("pred_boxes").f32;
    ASSERT_EQ(gl.size(), logits.size());
    const size_t overlap = top100_overlap(logits, gl);
    const double ml = max_abs(logits, gl), mbx = max_abs(boxes, gb);
    std::printf("%s %-8s (projector convs and heads %s, attention %s) top100 overlap %zu/100, logits max-abs %.3g pcc %.6f, boxes max-abs %.3g pcc %.6f\n",
                pn, label.c_str(), cpu::to_string(m.projector_prec()),
                m.int8_attention() ? (m.bf16_attention() ? "int8 in the ViT, bf16 in the decoder" : "int8 in the ViT")
                : m.bf16_attention() ? "bf16" : "fp32", overlap, ml,
                pcc(logits, gl), mbx, pcc(boxes, gb));
    // Loose bounds (the fp32 engine is within 3e-5; int8 end to end measured 4.3-5.3 and 0.93-1.13, the
    // rank swaps): a broken int8 path gives NaN or unbounded values.
    EXPECT_LT(ml, 20.0) << label;
    EXPECT_LT(mbx, 2.0) << label;
}

class cpu_int8_base : public ::testing::TestWithParam<int> {};

TEST_P(cpu_int8_base, keeps_fp32s_proposals_and_top100_in_fp32s_order) {
    const std::string weights = rfdetr::test::test_weights_dir();
    if (weights.empty()) RFDETR_SKIP_OR_FAIL("no seed-1 checkpoint (the synth_seed1 ctest fixture)");
    const auto g = rfdetr::test::read_golden(rfdetr::test::repo_fixtures_dir() + "/case-" + std::to_string(GetParam()) +
                                             "/golden.safetensors");
    check("case-" + std::to_string(GetParam()), weights, g);
}

INSTANTIATE_TEST_SUITE_P(fixture_cases, cpu_int8_base, ::testing::Values(1, 2, 3),
                         [](const auto & info) { return "case_" + std::to_string(info.param); });

class cpu_int8_family : public ::testing::TestWithParam<std::string> {};

TEST_P(cpu_int8_family, keeps_fp32s_proposals_and_top100_in_fp32s_order) {
    const std::string why = rfdetr::test::family_missing(GetParam());
    if (!why.empty()) RFDETR_SKIP_OR_FAIL(why);
    const auto c = rfdetr::test::family_load(GetParam());
    check(GetParam(), c.weights, c.golden);
}

INSTANTIATE_TEST_SUITE_P(sizes, cpu_int8_family, ::testing::Values("nano", "small", "medium", "large"),
                         [](const auto & info) { return info.param; });

class cpu_int8_seg : public ::testing::TestWithParam<std::string> {};

TEST_P(cpu_int8_seg, keeps_fp32s_proposals_top100_and_masks) {
    const std::string fix = rfdetr::test::seg_fixtures_dir(), weights = rfdetr::test::family_weights_dir("seg-" + GetParam());
    if (fix.empty()) RFDETR_SKIP_OR_FAIL("no ../shared/fixtures/rfdetr-seg (set RFDETR_SEG_FIXTURES)");
    if (!std::ifstream(weights + "/model.safetensors")) RFDETR_SKIP_OR_FAIL("no " + weights + " (run the synth_seg ctest fixture)");
    check("seg-" + GetParam(), weights, rfdetr::test::read_golden(fix + "/" + GetParam() + "/case-1/golden.safetensors"));
}

INSTANTIATE_TEST_SUITE_P(seg_sizes, cpu_int8_seg, ::testing::Values("nano", "small", "medium", "large"),
                         [](const auto & info) { return info.param; });

// int8 as a CPU without bf16 runs it (an AVX-512 VNNI CPU such as Ice Lake: the projector convs in fp32, the ViT's
// attention in int8, attention-int8.h), with this CPU's bf16 kernels switched off; the int8 kernels give the same int32
// sums on every ISA. The kernels this CPU picks by default are selected again afterwards.
class cpu_int8_no_bf16 : public ::testing::Test {
  protected:
    std::string f32_ = cpu::gemm_isa(), i8_ = cpu::qgemm_isa(), b16_ = cpu::bgemm_isa();
    void        SetUp() override {
        if (!cpu::gemm_select_isa("avx512") || !cpu::qgemm_select_isa("avx512vnni")) {
            RFDETR_SKIP_OR_FAIL("this CPU lacks the AVX-512 and AVX-512 VNNI kernels (see /proc/cpuinfo's flags)");
        }
        ASSERT_TRUE(cpu::bgemm_select_isa("none"));
        ASSERT_EQ(cpu::projector_precision(cpu::precision::int8), cpu::precision::fp32);
    }
    void TearDown() override {
        cpu::gemm_select_isa(f32_.c_str());
        cpu::qgemm_select_isa(i8_.c_str());
        cpu::bgemm_select_isa(b16_.c_str());
    }
};

TEST_F(cpu_int8_no_bf16, base_cases_keep_fp32s_proposals_and_top100_in_fp32s_order) {
    const std::string weights = rfdetr::test::test_weights_dir();
    if (weights.empty()) RFDETR_SKIP_OR_FAIL("no seed-1 checkpoint (the synth_seed1 ctest fixture)");
    for (int c : {1, 2, 3}) {
        const auto g = rfdetr::test::read_golden(rfdetr::test::repo_fixtures_dir() + "/case-" + std::to_string(c) +
                                                 "/golden.safetensors");
        check("case-" + std::to_string(c), weights, g);
    }
}

TEST_F(cpu_int8_no_bf16, family_sizes_keep_fp32s_proposals_and_top100_in_fp32s_order) {
    for (const char * size : {"nano", "small", "medium", "large"}) {
        const std::string why = rfdetr::test::family_missing(size);
        if (!why.empty()) RFDETR_SKIP_OR_FAIL(why);
        const auto c = rfdetr::test::family_load(size);
        check(size, c.weights, c.golden);
    }
}

// bf16 (bgemm.h) on the same cases: issue 34's gates with fp32's top-k injected (top-100 >= 95, logits PCC >= 0.999).
bool bf16_runs() {
    std::string missing;
    return cpu::bf16_supported(missing);
}
#define REQUIRE_BF16() \
    if (!bf16_runs()) RFDETR_SKIP_OR_FAIL("this CPU has no AVX512-BF16 or AMX-BF16 (see /proc/cpuinfo's flags)")

class cpu_bf16_base : public ::testing::TestWithParam<int> {};

TEST_P(cpu_bf16_base, keeps_fp32s_proposals_and_top100_in_fp32s_order) {
    REQUIRE_BF16();
    const std::string weights = rfdetr::test::test_weights_dir();
    if (weights.empty()) RFDETR_SKIP_OR_FAIL("no seed-1 checkpoint (the synth_seed1 ctest fixture)");
    const auto g = rfdetr::test::read_golden(rfdetr::test::repo_fixtures_dir() + "/case-" + std::to_string(GetParam()) +
                                             "/golden.safetensors");
    check("case-" + std::to_string(GetParam()), weights, g, cpu::precision::bf16);
}

INSTANTIATE_TEST_SUITE_P(fixture_cases, cpu_bf16_base, ::testing::Values(1, 2, 3),
                         [](const auto & info) { return "case_" + std::to_string(info.param); });

class cpu_bf16_family : public ::testing::TestWithParam<std::string> {};

TEST_P(cpu_bf16_family, keeps_fp32s_proposals_and_top100_in_fp32s_order) {
    REQUIRE_BF16();
    const std::string why = rfdetr::test::family_missing(GetParam());
    if (!why.empty()) RFDETR_SKIP_OR_FAIL(why);
    const auto c = rfdetr::test::family_load(GetParam());
    check(GetParam(), c.weights, c.golden, cpu::precision::bf16);
}

INSTANTIATE_TEST_SUITE_P(sizes, cpu_bf16_family, ::testing::Values("nano", "small", "medium", "large"),
                         [](const auto & info) { return info.param; });

class cpu_bf16_seg : public ::testing::TestWithParam<std::string> {};

TEST_P(cpu_bf16_seg, keeps_fp32s_proposals_top100_and_masks) {
    REQUIRE_BF16();
    const std::string fix = rfdetr::test::seg_fixtures_dir(), weights = rfdetr::test::family_weights_dir("seg-" + GetParam());
    if (fix.empty()) RFDETR_SKIP_OR_FAIL("no ../shared/fixtures/rfdetr-seg (set RFDETR_SEG_FIXTURES)");
    if (!std::ifstream(weights + "/model.safetensors")) RFDETR_SKIP_OR_FAIL("no " + weights + " (run the synth_seg ctest fixture)");
    check("seg-" + GetParam(), weights, rfdetr::test::read_golden(fix + "/" + GetParam() + "/case-1/golden.safetensors"),
          cpu::precision::bf16);
}

INSTANTIATE_TEST_SUITE_P(seg_sizes, cpu_bf16_seg, ::testing::Values("nano", "small", "medium", "large"),
                         [](const auto & info) { return info.param; });

}  // namespace
