// Selected rows through the sidecar process (PROTOCOL.md, "Selected rows"): a `segment` engine's hello marks
// pred_masks `rows: "selected"`, an infer's `select` picks the rows the reply carries (and names in `rows`),
// no `select` means no rows, bad values are E_FIELD naming what was expected, and a detect engine ignores it.
#include "sidecar-harness.h"

namespace {

using namespace rfdetr_test;

constexpr size_t k_mask_floats = size_t(rfdetr::k_test_echo_mask_side) * rfdetr::k_test_echo_mask_side;

// pixel_values whose echoed logits (px + 1) are -9 everywhere but: query 5 class 3 -> 3, query 7 class 1 -> 2,
// query 9 class 2 -> 1 (sigmoid 0.95, 0.88, 0.73).
std::vector<float> three_detections() {
    std::vector<float> px(k_pixels, -10.0f);
    px[5 * 91 + 3] = 2.0f;
    px[7 * 91 + 1] = 1.0f;
    px[9 * 91 + 2] = 0.0f;
    return px;
}

message with_select(message m, double threshold, uint64_t max) {
    m.fields           |= rfdetr::WIRE_FIELD_SELECT;
    m.select.threshold  = threshold;
    m.select.max        = max;
    return m;
}

std::vector<uint64_t> rows_of(const message & r, const std::string & name) {
    for (const auto & x : r.rows) {
        if (x.name == name) return x.queries;
    }
    ADD_FAILURE() << "the reply has no rows for " << name;
    return {};
}

class segment_sidecar : public sidecar {
  protected:
    void sends_the_selected_rows(const std::string & engine);
};

// test-echo resizes on the forward thread, test-sleep on the stage thread (each request's select travels with it).
TEST_F(segment_sidecar, a_segment_engine_sends_the_mask_rows_its_select_picks_and_names_them) {
    sends_the_selected_rows("test-echo");
}

TEST_F(segment_sidecar, the_same_when_the_resize_overlaps_the_forward) {
    sends_the_selected_rows("test-sleep");
}

void segment_sidecar::sends_the_selected_rows(const std::string & engine) {
    sidecar_proc p;
    start(p, {"RFDETR_TEST_ECHO_TASK=segment", "RFDETR_TEST_FORWARD_MS=0"}, {}, engine);
    client  c;
    message hello;
    ASSERT_TRUE(c.open(socket_, &hello));
    EXPECT_EQ(hello.task, "segment");
    ASSERT_EQ(hello.output_specs.size(), 3u);
    EXPECT_EQ(hello.output_specs[2].name, "pred_masks");
    EXPECT_TRUE(hello.output_specs[2].selected);
    EXPECT_FALSE(hello.output_specs[0].selected || hello.output_specs[1].selected);
    EXPECT_EQ(hello.output_specs[2].shape, (std::vector<uint64_t>{300, 140, 140}));

    const auto px = three_detections();
    struct want {
        double                threshold;
        uint64_t              max;
        std::vector<uint64_t> rows;
    };
    for (const auto & w : {want{0.5, 10, {5, 7, 9}}, want{0.8, 10, {5, 7}}, want{0.5, 1, {5}}, want{0.5, 0, {}},
                           want{0.99, 10, {}}}) {
        c.send_msg(with_select(make_infer(3, px), w.threshold, w.max));
        message              r;
        std::vector<uint8_t> s;
        ASSERT_TRUE(c.recv_msg(r, s));
        ASSERT_TRUE(r.ok) << r.error_message;
        EXPECT_EQ(rows_of(r, "pred_masks"), w.rows) << "threshold " << w.threshold << " max " << w.max;
        const auto masks = reply_output(r, "pred_masks");
        ASSERT_EQ(masks.size, w.rows.size() * k_mask_floats * 4);
        for (size_t k = 0; k < w.rows.size(); k++) {
            float first = 0, fourth = 0;
            std::memcpy(&first, masks.data + k * k_mask_floats * 4, 4);
            std::memcpy(&fourth, masks.data + (k * k_mask_floats + 3) * 4, 4);
            EXPECT_EQ(first, static_cast<float>(w.rows[k])) << "row " << k << " is query " << w.rows[k] << "'s";
            EXPECT_EQ(fourth, static_cast<float>(w.rows[k]) + 0.75f);
        }
        EXPECT_EQ(reply_output(r, "logits").size, 300u * 91u * 4u) << "the logits keep every query";
    }

    // classes and class_thresholds narrow it by label.
    message m                  = with_select(make_infer(4, px), 0.5, 10);
    m.select.has_classes        = true;
    m.select.classes            = {2, 3};
    m.select.has_class_thresholds = true;
    m.select.class_thresholds   = {{"3", 0.96}};
    c.send_msg(m);
    message              r;
    std::vector<uint8_t> s;
    ASSERT_TRUE(c.recv_msg(r, s));
    ASSERT_TRUE(r.ok) << r.error_message;
    EXPECT_EQ(rows_of(r, "pred_masks"), (std::vector<uint64_t>{9}));

    // Without select: no rows, and the key says so.
    c.send_msg(make_image_infer(5, 64, 48, noise_rgb(64, 48, 7)));
    ASSERT_TRUE(c.recv_msg(r, s));
    ASSERT_TRUE(r.ok) << r.error_message;
    EXPECT_TRUE(r.has(rfdetr::WIRE_FIELD_ROWS));
    EXPECT_EQ(rows_of(r, "pred_masks"), std::vector<uint64_t>{});
    EXPECT_EQ(reply_output(r, "pred_masks").size, 0u);
}

TEST_F(sidecar, a_bad_select_value_is_a_field_error_naming_the_expected_and_the_received) {
    sidecar_proc p;
    start(p, {"RFDETR_TEST_ECHO_TASK=segment"});
    client c;
    ASSERT_TRUE(c.open(socket_));
    const auto px  = three_detections();
    const auto err = [&](message m) {
        c.send_msg(m);
        message              r;
        std::vector<uint8_t> s;
        EXPECT_TRUE(c.recv_msg(r, s));
        EXPECT_FALSE(r.ok);
        EXPECT_EQ(r.error_code, rfdetr::wire_error::WIRE_ERROR_FIELD);
        return r.error_message;
    };
    EXPECT_EQ(err(with_select(make_infer(3, px), 1.5, 10)), "select.threshold is 1.5; expected a number from 0 to 1");
    EXPECT_EQ(err(with_select(make_infer(4, px), std::nan(""), 10)), "select.threshold is nan; expected a number from 0 to 1");
    for (const char * key : {"07", "x", "-1", "", "99999999999"}) {
        message m                    = with_select(make_infer(5, px), 0.5, 10);
        m.select.has_class_thresholds = true;
        m.select.class_thresholds     = {{key, 0.5}};
        EXPECT_EQ(err(m), std::string("select.class_thresholds has the key '") + key +
                              "'; expected a class id as a decimal string without leading zeros (\"0\", \"17\")");
    }
    message m                    = with_select(make_infer(6, px), 0.5, 10);
    m.select.has_class_thresholds = true;
    m.select.class_thresholds     = {{"3", -0.25}};
    EXPECT_EQ(err(m), "select.class_thresholds['3'] is -0.25; expected a number from 0 to 1");
    m.select.class_thresholds = {{"3", 0.5}, {"3", 0.25}};
    EXPECT_EQ(err(m), "select.class_thresholds names class 3 twice");
    EXPECT_TRUE(serves_a_ping(socket_, 9)) << "the connection and the sidecar stay up";
}

TEST_F(sidecar, a_detect_engine_accepts_select_and_sends_no_rows) {
    sidecar_proc p;
    start(p);
    client c;
    ASSERT_TRUE(c.open(socket_));
    c.send_msg(with_select(make_infer(3, three_detections()), 0.5, 10));
    message              r;
    std::vector<uint8_t> s;
    ASSERT_TRUE(c.recv_msg(r, s));
    ASSERT_TRUE(r.ok) << r.error_message;
    EXPECT_FALSE(r.has(rfdetr::WIRE_FIELD_ROWS));
    EXPECT_EQ(r.outputs.size(), 2u);
}

}  // namespace
