// The "cpu" engine through the engine interface and the registry, as the sidecar creates it.
#include "engines/cpu/bgemm.h"
#include "engines/cpu/gemm.h"
#include "engines/cpu/isa-level.h"
#include "engines/cpu/qgemm.h"
#include "engines/registry.h"
#include "golden-file.h"
#include "skip.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>

namespace {

TEST(cpu_engine, is_registered_and_describes_itself) {
    const auto names = rfdetr::engine_names();
    ASSERT_NE(std::find(names.begin(), names.end(), "cpu"), names.end());
    rfdetr::engine_options opts;
    opts.threads = 1;
    auto e       = rfdetr::engine_create("cpu", rfdetr::test::test_weights_dir(), opts);
    EXPECT_EQ(e->name(), "cpu");
    EXPECT_NE(e->device().find(std::string("(1 thread, ") + rfdetr::cpu::gemm_isa() + " kernels)"), std::string::npos)
        << e->device();
    EXPECT_EQ(e->num_queries(), 300);
    EXPECT_EQ(e->num_classes(), 91);
    ASSERT_EQ(e->labels().size(), 91u);
    EXPECT_EQ(e->task(), "detect");
    EXPECT_EQ(e->precision(), "fp32");  // the registry's default, opts.precision left empty

    // One forward through the interface: the case-1 golden within the end-to-end ceiling.
    auto g = rfdetr::test::read_golden(rfdetr::test::repo_fixtures_dir() + "/case-1/golden.safetensors");
    rfdetr::output_buffers out(e->outputs());
    e->forward(g.at("pixel_values").f32.data(), out);
    const std::vector<float> & logits = out.values(0);
    const std::vector<float> & boxes  = out.values(1);
    ASSERT_EQ(logits.size(), 300u * 91u);
    ASSERT_EQ(boxes.size(), 300u * 4u);
    double worst = 0.0;
    for (size_t i = 0; i < logits.size(); ++i) {
        ASSERT_TRUE(std::isfinite(logits[i]));
        worst = std::max(worst, std::fabs(static_cast<double>(logits[i]) - g.at("logits").f32[i]));
    }
    EXPECT_LE(worst, 3e-4);
    for (size_t i = 0; i < boxes.size(); ++i) EXPECT_NEAR(boxes[i], g.at("pred_boxes").f32[i], 2e-5);
}

TEST(cpu_engine, refuses_bad_options_and_missing_weights_by_name) {
    rfdetr::engine_options opts;
    opts.threads = -2;
    try {
        rfdetr::engine_create("cpu", rfdetr::test::test_weights_dir(), opts);
        FAIL() << "negative threads accepted";
    } catch (const rfdetr::error & e) {
        EXPECT_NE(std::string(e.what()).find("threads"), std::string::npos) << e.what();
        EXPECT_NE(std::string(e.what()).find("-2"), std::string::npos) << e.what();
    }
    opts.threads   = 1;
    opts.precision = "fp16";
    try {
        rfdetr::engine_create("cpu", rfdetr::test::test_weights_dir(), opts);
        FAIL() << "precision fp16 accepted";
    } catch (const rfdetr::error & e) {
        EXPECT_NE(std::string(e.what()).find("engine 'cpu' cannot run --precision 'fp16'; it runs fp32, int8, bf16"),
                  std::string::npos) << e.what();
    }
    opts.precision = "fp32";
    try {
        rfdetr::engine_create("cpu", "/nonexistent/rfdetr-weights", opts);
        FAIL() << "missing weights accepted";
    } catch (const rfdetr::error & e) {
        EXPECT_NE(std::string(e.what()).find("/nonexistent/rfdetr-weights"), std::string::npos) << e.what();
    }
}

// A reduced precision's engine: its device line names the kernel (and the int8 attention where the ViT's runs in int8,
// which int8-accuracy-test checks: on AVX-512 VNNI without a bf16 attention), its hello says the precision, and its case-1 logits are finite and not fp32's bit for bit (the
// reduced GEMMs ran).
void expect_reduced_precision_runs(const std::string & precision, const std::string & kernel) {
    rfdetr::engine_options opts;
    opts.threads   = 1;
    opts.precision = precision;
    auto              e    = rfdetr::engine_create("cpu", rfdetr::test::test_weights_dir(), opts);
    const std::string name = ", " + precision + " " + kernel;
    EXPECT_TRUE(e->device().find(name + ")") != std::string::npos ||
                (kernel == "avx512vnni" && e->device().find(name + " with int8 attention)") != std::string::npos))
        << e->device();
    EXPECT_EQ(e->precision(), precision);
    auto g = rfdetr::test::read_golden(rfdetr::test::repo_fixtures_dir() + "/case-1/golden.safetensors");
    rfdetr::output_buffers out(e->outputs());
    e->forward(g.at("pixel_values").f32.data(), out);
    const std::vector<float> & logits = out.values(0);
    bool differs = false;
    for (size_t i = 0; i < logits.size(); ++i) {
        ASSERT_TRUE(std::isfinite(logits[i]));
        differs = differs || logits[i] != g.at("logits").f32[i];
    }
    EXPECT_TRUE(differs) << precision << " gave the fp32 logits bit for bit: the " << precision << " GEMMs did not run";
}

TEST(cpu_engine, int8_precision_names_its_kernels_and_stays_near_fp32) {
    expect_reduced_precision_runs("int8", rfdetr::cpu::qgemm_isa());
}

TEST(cpu_engine, bf16_precision_names_its_kernel) {
    std::string missing;
    if (!rfdetr::cpu::bf16_supported(missing)) {
        RFDETR_SKIP_OR_FAIL("this CPU has no AVX512-BF16 or AMX-BF16 (see /proc/cpuinfo's flags): bf16 cannot run");
    }
    expect_reduced_precision_runs("bf16", rfdetr::cpu::bgemm_isa());
}

// A kernel level without bf16 kernels (avx2) refuses bf16 before loading, naming the level and what runs; the
// registry check (what the sidecar exits 2 on) says the same.
TEST(cpu_engine, bf16_under_a_level_without_bf16_kernels_is_refused_by_name) {
    if (std::string(rfdetr::cpu::bgemm_best_isa()) == "none") {
        RFDETR_SKIP_OR_FAIL("this CPU has no AVX512-BF16 or AMX-BF16: bf16 is refused for the CPU, not the level");
    }
    const std::string b = rfdetr::cpu::bgemm_isa(), f32 = rfdetr::cpu::gemm_isa(), i8 = rfdetr::cpu::qgemm_isa();
    setenv("RFDETR_CPU_ISA", "avx2", 1);
    rfdetr::engine_options opts;
    opts.threads   = 1;
    opts.precision = "bf16";
    try {
        rfdetr::engine_create("cpu", "/nonexistent/rfdetr-weights", opts);
        ADD_FAILURE() << "bf16 accepted under RFDETR_CPU_ISA=avx2";
    } catch (const rfdetr::error & e) {
        EXPECT_NE(std::string(e.what()).find("--precision bf16 needs AVX512-BF16 or AMX-BF16 kernels, which "
                                             "RFDETR_CPU_ISA=avx2 excludes"),
                  std::string::npos) << e.what();
        EXPECT_EQ(std::string(e.what()).find("/nonexistent"), std::string::npos) << "refused after loading: " << e.what();
    }
    EXPECT_STREQ(rfdetr::cpu::bgemm_isa(), "none");
    // avx512 runs the AVX512-BF16 kernel, amx the AMX one (where the CPU has them).
    EXPECT_EQ(rfdetr::cpu::select_isa_level("avx512"), "");
    EXPECT_STREQ(rfdetr::cpu::bgemm_isa(), __builtin_cpu_supports("avx512bf16") ? "avx512bf16" : "none");
    if (rfdetr::cpu::select_isa_level("amx").empty()) {
        EXPECT_STREQ(rfdetr::cpu::bgemm_isa(), rfdetr::cpu::bgemm_best_isa());
    }
    unsetenv("RFDETR_CPU_ISA");
    rfdetr::cpu::gemm_select_isa(f32.c_str());
    rfdetr::cpu::qgemm_select_isa(i8.c_str());
    rfdetr::cpu::bgemm_select_isa(b.c_str());
}

TEST(cpu_engine, kernel_level_cap_is_checked) {
    rfdetr::engine_options opts;
    opts.threads = 1;
    const std::string f32 = rfdetr::cpu::gemm_isa(), i8 = rfdetr::cpu::qgemm_isa(), b = rfdetr::cpu::bgemm_isa();
    setenv("RFDETR_CPU_ISA", "sse2", 1);
    try {
        rfdetr::engine_create("cpu", rfdetr::test::test_weights_dir(), opts);
        ADD_FAILURE() << "RFDETR_CPU_ISA=sse2 accepted";
    } catch (const rfdetr::error & e) {
        EXPECT_NE(std::string(e.what()).find("avx2, avxvnni or avx512"), std::string::npos) << e.what();
    }
    setenv("RFDETR_CPU_ISA", "avx2", 1);
    auto e = rfdetr::engine_create("cpu", rfdetr::test::test_weights_dir(), opts);
    EXPECT_STREQ(rfdetr::cpu::gemm_isa(), "avx2");
    EXPECT_STREQ(rfdetr::cpu::qgemm_isa(), "avx2");
    EXPECT_NE(e->device().find("avx2 kernels"), std::string::npos) << e->device();
    unsetenv("RFDETR_CPU_ISA");
    rfdetr::cpu::gemm_select_isa(f32.c_str());
    rfdetr::cpu::qgemm_select_isa(i8.c_str());
    rfdetr::cpu::bgemm_select_isa(b.c_str());
}

}  // namespace
