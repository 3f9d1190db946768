// An engine that does not run RF-DETR Seg's mask head yet refuses a Seg checkpoint by name
// (engines/task-support.h): the checkpoint loads, the engine factory says why it cannot serve it, and detection
// checkpoints pass. The cpu engine runs it and declares the segment task's outputs.
#include <gtest/gtest.h>

#include <functional>

#include "engines/registry.h"
#include "engines/task-support.h"
#include "test-util.h"

using namespace rfdetr_test;

namespace {

std::string seg_checkpoint(const std::string & variant) {
    const std::string cfg = coco_config([&](nlohmann::ordered_json & j) {
        std::function<void(nlohmann::ordered_json &, const nlohmann::ordered_json &)> merge =
            [&](nlohmann::ordered_json & t, const nlohmann::ordered_json & p) {
                for (auto it = p.begin(); it != p.end(); ++it) {
                    if (it.value().is_object() && t.contains(it.key()) && t[it.key()].is_object()) {
                        merge(t[it.key()], it.value());
                    } else {
                        t[it.key()] = it.value();
                    }
                }
            };
        merge(j, nlohmann::ordered_json::parse(rfdetr::schema_get(variant).config_json));
    });
    return make_checkpoint("task-" + variant, schema_tensors(91, variant), cfg);
}

}  // namespace

TEST(EngineTask, SegCheckpointsLoadButEnginesRefuseThemByName) {
    const std::string dir = seg_checkpoint("seg-nano");
    ASSERT_EQ(open_error(dir), "");
    for (const std::string engine : { "tt-host" }) {
        SCOPED_TRACE(engine);
        try {
            rfdetr::engine_create(engine, dir, {});
            ADD_FAILURE() << "no error";
        } catch (const rfdetr::error & e) {
            const std::string msg = e.what();
            EXPECT_HAS(msg, "the " + engine + " engine does not run RF-DETR Seg's mask head yet");
            EXPECT_HAS(msg, "RF-DETR-Seg-Nano (task 'segment', variant seg-nano)");
        }
    }
}

TEST(EngineTask, DetectionSchemasPassSegSchemasDoNot) {
    EXPECT_NO_THROW(rfdetr::engine_require_task("tt-host", rfdetr::schema_get("nano")));
    EXPECT_THROW(rfdetr::engine_require_task("tt-host", rfdetr::schema_get("seg-2xlarge")), rfdetr::error);
}

TEST(EngineTask, TheCpuEngineRunsSegAndDeclaresTheSegmentOutputs) {
    const std::string      dir = seg_checkpoint("seg-nano");
    rfdetr::engine_options opts;
    opts.threads = 1;
    const auto e = rfdetr::engine_create("cpu", dir, opts);
    EXPECT_EQ(e->task(), "segment");
    EXPECT_EQ(e->variant(), "seg-nano");
    EXPECT_EQ(e->num_queries(), 100);
    EXPECT_EQ(e->input_size(), 312);
    const auto outs = e->outputs();
    ASSERT_EQ(outs.size(), 3u);
    EXPECT_EQ(outs[2].name, "pred_masks");
    EXPECT_TRUE(outs[2].selected);
    EXPECT_EQ(outs[2].shape, (std::vector<uint64_t>{ 100, 78, 78 }));
}
