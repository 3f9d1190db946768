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
    std::string task() const override { return task_; }
    std::string precision() const override { return "fp32"; }
    void forward(const float *, output_buffers & out) override {
        for (const auto & n : writes_) {
            float * p = out.at(n);
            if (n == "logits") {
                // query q: class 0 at logit q - 1, class 1 at -9: queries 2 (sigmoid 0.73) and 1 (0.5) pass 0.4
                for (int q = 0; q < 3; q++) {
                    p[q * 2]     = static_cast<float>(q - 1);
                    p[q * 2 + 1] = -9.0f;
                }
            } else if (n == "pred_masks") {
                for (size_t r = 0; r < out.rows().size(); r++) {
                    p[r] = static_cast<float>(out.rows()[r]);  // M = 1: one float per row
                }
            } else {
                p[0] = 1.0f;
            }
        }
    }
    std::string task_ = "detect";

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
    EXPECT_FALSE(o[0].selected || o[1].selected);
    EXPECT_EQ(rfdetr::task_names(), (std::vector<std::string>{"detect", "segment"}));
    try {
        rfdetr::task_outputs("classify", {300, 91, 560});
        FAIL() << "an unknown task was given outputs";
    } catch (const rfdetr::error & e) {
        EXPECT_STREQ(e.what(), "task_outputs: unknown task 'classify'; the task table has detect, segment");
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

namespace {

partial_engine segment_engine(std::vector<std::string> writes) {
    partial_engine e(std::move(writes));
    e.task_ = "segment";
    return e;
}

rfdetr::row_select above(double threshold) {
    rfdetr::row_select s;
    s.threshold = threshold;
    s.max       = 10;
    return s;
}

TEST(task_table, segment_adds_pred_masks_selected_by_rows_at_a_quarter_of_the_input_side) {
    for (const auto & [side, m] : {std::pair{312, 78}, {384, 96}, {432, 108}, {504, 126}}) {
        const auto o = rfdetr::task_outputs("segment", {200, 91, side});
        ASSERT_EQ(o.size(), 3u);
        EXPECT_EQ(o[0].name, "logits");
        EXPECT_EQ(o[1].name, "pred_boxes");
        EXPECT_FALSE(o[0].selected || o[1].selected);
        EXPECT_EQ(o[2].name, "pred_masks");
        EXPECT_TRUE(o[2].selected);
        EXPECT_EQ(o[2].shape, (std::vector<uint64_t>{200, uint64_t(m), uint64_t(m)}));
        EXPECT_EQ(o[2].row_count(), size_t(m) * m);
    }
}

TEST(output_buffers, a_selected_output_holds_exactly_the_selected_rows_in_their_order) {
    auto           eng = segment_engine({"logits", "pred_boxes", "pred_masks"});
    output_buffers out(eng.outputs());  // input side 4: M = 1
    ASSERT_TRUE(out.has_selected());
    rfdetr::engine_forward(eng, nullptr, out, above(0.4));
    EXPECT_EQ(out.rows(), (std::vector<uint32_t>{2, 1}));
    EXPECT_EQ(out.values(2), (std::vector<float>{2.0f, 1.0f}));
    EXPECT_EQ(out.values(0).size(), 6u) << "the logits keep every query";

    // Without a selection the selected output carries no rows, whatever the last forward had.
    rfdetr::engine_forward(eng, nullptr, out);
    EXPECT_TRUE(out.rows().empty());
    EXPECT_TRUE(out.values(2).empty());
    rfdetr::engine_forward(eng, nullptr, out, above(0.6));
    EXPECT_EQ(out.rows(), (std::vector<uint32_t>{2}));
    EXPECT_EQ(out.values(2), (std::vector<float>{2.0f}));
}

TEST(output_buffers, a_selected_output_with_rows_must_be_written_and_with_none_need_not_be) {
    auto           lazy = segment_engine({"logits", "pred_boxes"});
    output_buffers out(lazy.outputs());
    rfdetr::engine_forward(lazy, nullptr, out);             // no selection: nothing to compute
    rfdetr::engine_forward(lazy, nullptr, out, above(0.99));  // a selection that picks no query
    EXPECT_TRUE(out.rows().empty());
    try {
        rfdetr::engine_forward(lazy, nullptr, out, above(0.4));
        FAIL() << "a forward that skipped the selected rows passed";
    } catch (const rfdetr::error & e) {
        EXPECT_NE(std::string(e.what()).find("engine 'partial' declares the output(s) 'pred_masks'"), std::string::npos)
            << e.what();
    }
}

TEST(output_buffers, the_rows_come_from_the_written_logits_only) {
    auto           early = segment_engine({"pred_masks", "logits", "pred_boxes"});
    output_buffers out(early.outputs());
    try {
        rfdetr::engine_forward(early, nullptr, out, above(0.4));
        FAIL() << "rows were handed out before the logits were written";
    } catch (const rfdetr::error & e) {
        EXPECT_NE(std::string(e.what()).find("write 'logits' before asking for the rows"), std::string::npos) << e.what();
    }
    partial_engine det({"logits", "pred_boxes"});
    output_buffers d(det.outputs());
    EXPECT_FALSE(d.has_selected());
    rfdetr::engine_forward(det, nullptr, d, above(0.4));  // a selection on a task without a selected output: ignored
    EXPECT_THROW(d.rows(), rfdetr::error);
    EXPECT_THROW(output_buffers({{"pred_masks", {3, 1, 1}, true}}), rfdetr::error) << "no logits to select from";
}

}  // namespace
