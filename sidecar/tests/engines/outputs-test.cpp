// The task table (what a task's head outputs) and the output buffers an engine fills, with the check that a
// forward wrote every declared output.
#include "engines/engine.h"

#include <gtest/gtest.h>

namespace {

using rfdetr::output_buffers;

// An engine whose forward writes the outputs it is told to, by name.
class partial_engine final : public rfdetr::engine {
  public:
    explicit partial_engine(std::vector<std::string> writes) : writes_(std::move(writes)) {}
    std::string name() const override { return "partial"; }
    std::string device() const override { return "test"; }
    int num_queries() const override { return 3; }
    int num_classes() const override { return 2; }
    int input_size() const override { return 4; }
    std::string variant() const override { return "base"; }
    const std::vector<std::string> & labels() const override { return labels_; }
    std::string task() const override { return "detect"; }
    std::string precision() const override { return "fp32"; }
    void forward(const float *, output_buffers & out) override {
        for (const auto & n : writes_) {
            out.at(n)[0] = 1.0f;
        }
    }

  private:
    std::vector<std::string> writes_;
    std::vector<std::string> labels_{"a", "b"};
};

TEST(task_table, detect_outputs_logits_then_pred_boxes_shaped_by_the_head) {
    const auto o = rfdetr::task_outputs("detect", {300, 91, 560});
    ASSERT_EQ(o.size(), 2u);
    EXPECT_EQ(o[0].name, "logits");
    EXPECT_EQ(o[0].shape, (std::vector<uint64_t>{300, 91}));
    EXPECT_EQ(o[0].count(), 300u * 91u);
    EXPECT_EQ(o[1].name, "pred_boxes");
    EXPECT_EQ(o[1].shape, (std::vector<uint64_t>{300, 4}));
    EXPECT_EQ(rfdetr::task_names(), std::vector<std::string>{"detect"});
    try {
        rfdetr::task_outputs("segment", {300, 91, 560});
        FAIL() << "an unknown task was given outputs";
    } catch (const rfdetr::error & e) {
        EXPECT_STREQ(e.what(), "task_outputs: unknown task 'segment'; the task table has detect");
    }
}

TEST(output_buffers, an_engine_gets_its_outputs_by_name_and_nothing_else) {
    partial_engine eng({"logits", "pred_boxes"});
    output_buffers out(eng.outputs());
    ASSERT_EQ(out.specs().size(), 2u);
    EXPECT_EQ(out.values(0).size(), 6u);
    EXPECT_EQ(out.values(1).size(), 12u);
    rfdetr::engine_forward(eng, nullptr, out);
    EXPECT_EQ(out.values(1)[0], 1.0f);
    try {
        out.at("pred_masks");
        FAIL() << "an undeclared output was handed out";
    } catch (const rfdetr::error & e) {
        EXPECT_STREQ(e.what(),
                     "output_buffers::at: no output named 'pred_masks'; this engine's task declares logits, pred_boxes");
    }
}

TEST(output_buffers, a_forward_that_leaves_a_declared_output_unwritten_is_an_error) {
    partial_engine eng({"logits"});
    output_buffers out(eng.outputs());
    try {
        rfdetr::engine_forward(eng, nullptr, out);
        FAIL() << "a forward without pred_boxes passed";
    } catch (const rfdetr::error & e) {
        EXPECT_NE(std::string(e.what()).find("engine 'partial' declares the output(s) 'pred_boxes'"), std::string::npos)
            << e.what();
    }
    // Each forward is checked on its own: the last one's writes do not count.
    partial_engine full({"logits", "pred_boxes"});
    rfdetr::engine_forward(full, nullptr, out);
    EXPECT_THROW(rfdetr::engine_forward(eng, nullptr, out), rfdetr::error);
}

}  // namespace
