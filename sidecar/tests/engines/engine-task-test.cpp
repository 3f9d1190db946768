// RF-DETR Seg on a sparse checkpoint through the registry: every engine this build has (cpu, tt-host) runs it,
// declares the segment task and its outputs (pred_masks selected, M = S/4).
#include <gtest/gtest.h>

#include <functional>

#include "engines/registry.h"
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

TEST(EngineTask, EveryEngineRunsSegAndDeclaresTheSegmentOutputs) {
    const std::string dir = seg_checkpoint("seg-nano");
    for (const std::string engine : { "cpu", "tt-host" }) {
        SCOPED_TRACE(engine);
        rfdetr::engine_options opts;
        opts.threads = 1;
        const auto e = rfdetr::engine_create(engine, dir, opts);
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
}
