// The engines as the sidecar creates them, through the registry: `tt-host` end to end on case-1 with the
// product checkpoint loader, and `tt` refusing to start (with how to build it) in a build without ttnn.
#include "engines/registry.h"
#include "tt-test-support.h"

#include <algorithm>

using namespace rfdetr;
using namespace rfdetr::tt_test;

TEST(TtEngineRegistry, TtHostAlwaysRunsAndTtOnlyWithTtnn) {
    auto names = engine_names();
    EXPECT_NE(std::find(names.begin(), names.end(), "tt-host"), names.end());
#ifdef RFDETR_WITH_TTNN
    EXPECT_NE(std::find(names.begin(), names.end(), "tt"), names.end());
    EXPECT_EQ(engine_unbuilt_reason("tt"), "");
#else
    // `tt` is known but not runnable: not listed (so --help's "built:" list is a true answer) and its reason
    // says how to build it.
    EXPECT_EQ(std::find(names.begin(), names.end(), "tt"), names.end());
    EXPECT_NE(engine_unbuilt_reason("tt").find("RFDETR_WITH_TTNN=ON"), std::string::npos);
#endif
    EXPECT_EQ(engine_unbuilt_reason("cpu"), "");
    EXPECT_EQ(engine_unbuilt_reason("no-such-engine"), "");
}

// The card runs the bf16 device plan only (tt-graph.h "device"; tt_engine_create passes no other plan), off
// the host's cores; tt-host models fp32 or that plan on the host. The registry says so, and a tt asked for
// fp32 is refused before any weights or device are touched, in builds with and without ttnn.
TEST(TtEngineRegistry, RowsTellWhatTheTtEnginesRun) {
    const engine_entry * tt   = engine_find(engine_registry(), "tt");
    const engine_entry * host = engine_find(engine_registry(), "tt-host");
    ASSERT_NE(tt, nullptr);
    ASSERT_NE(host, nullptr);
    EXPECT_EQ(tt->precisions, std::vector<std::string>{"bf16"});
    EXPECT_FALSE(tt->host_cores);
    EXPECT_EQ(host->precisions, (std::vector<std::string>{"fp32", "bf16"}));
    EXPECT_TRUE(host->host_cores);
    engine_options o;
    o.precision = "fp32";
    try {
        engine_create("tt", "/nonexistent-weights", o);
        FAIL() << "engine 'tt' accepted precision fp32";
    } catch (const error & e) {
        EXPECT_NE(std::string(e.what()).find("engine 'tt' cannot run --precision 'fp32'; it runs bf16"), std::string::npos)
            << e.what();
    }
}

#ifndef RFDETR_WITH_TTNN
TEST(TtEngineRegistry, TtWithoutTtnnRefusesAndSaysHowToBuild) {
    try {
        engine_create("tt", "/nonexistent-weights", engine_options{});
        FAIL() << "engine 'tt' started in a build without ttnn";
    } catch (const error & e) {
        std::string m = e.what();
        EXPECT_NE(m.find("RFDETR_WITH_TTNN=ON"), std::string::npos) << m;
        EXPECT_NE(m.find("TT_METAL_HOME"), std::string::npos) << m;
        EXPECT_NE(m.find("tt-host"), std::string::npos) << m;
    }
}
#endif

TEST(TtEngineRegistry, TtHostRefusesAnUnknownPrecision) {
    std::string w = weights_dir();
    if (w.empty() || !path_exists(w + "/model.safetensors")) {
        RFDETR_SKIP_OR_FAIL("seed-1 checkpoint not found at '" + w + "' (run the synth_seed1 ctest fixture)");
    }
    engine_options o;
    o.precision = "fp16";
    try {
        engine_create("tt-host", w, o);
        FAIL() << "precision fp16 accepted";
    } catch (const error & e) {
        EXPECT_NE(std::string(e.what()).find("engine 'tt-host' cannot run --precision 'fp16'; it runs fp32, bf16"),
                  std::string::npos) << e.what();
    }
}

TEST(TtEngineRegistry, TtHostEagerForwardMatchesCase1) {
    std::string w = weights_dir();
    if (w.empty() || !path_exists(w + "/model.safetensors")) {
        RFDETR_SKIP_OR_FAIL("seed-1 checkpoint not found at '" + w + "' (run the synth_seed1 ctest fixture)");
    }
    engine_options o;
    o.eager  = true;  // one warm run at start, then one eager forward: the cheapest full check
    auto eng = engine_create("tt-host", w, o);
    EXPECT_EQ(eng->name(), "tt-host");
    EXPECT_EQ(eng->num_queries(), 300);
    EXPECT_EQ(eng->num_classes(), 91);
    EXPECT_EQ(eng->labels().size(), 91u);
    EXPECT_NE(eng->device().find("eager"), std::string::npos) << eng->device();
    EXPECT_EQ(eng->precision(), "fp32");  // the registry default
    EXPECT_EQ(eng->task(), "detect");
    auto                   g = tt_read_safetensors(repo_fixtures_dir() + "/case-1/golden.safetensors");
    rfdetr::output_buffers out(eng->outputs());
    eng->forward(g.at("pixel_values").f32.data(), out);
    const std::vector<float> & logits = out.values(0);
    const std::vector<float> & boxes  = out.values(1);
    auto el = max_abs_diff(logits.data(), g.at("logits").f32.data(), logits.size());
    auto eb = max_abs_diff(boxes.data(), g.at("pred_boxes").f32.data(), boxes.size());
    EXPECT_TRUE(el.finite && eb.finite);
    EXPECT_LE(el.abs, 1e-3);
    EXPECT_LE(eb.abs, 1e-3);
}
