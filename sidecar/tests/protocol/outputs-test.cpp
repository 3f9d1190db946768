// The version-4 hello (task, outputs, precision, precisions, host_cores) and the infer reply's `outputs` map
// through the C++ codec: round trips, canonical order, and what a malformed one is told. The golden frames
// (protocol-test.cpp) hold the TypeScript encoder's bytes for the same messages.
#include "protocol/protocol.h"

#include <gtest/gtest.h>

#include <cstring>

namespace {

using rfdetr::message;

message v4_hello() {
    message h;
    h.fields           = rfdetr::k_hello_fields;
    h.op               = rfdetr::wire_op::WIRE_OP_HELLO;
    h.ok               = true;
    h.protocol_version = rfdetr::k_protocol_version;
    h.sidecar_version  = "0.1.0";
    h.engine           = "cpu";
    h.device           = "test";
    h.input_shape      = {3, 384, 384};
    h.num_queries      = 300;
    h.num_classes      = 2;
    h.labels           = {"N/A", "person"};
    h.variant          = "nano";
    h.task             = "detect";
    h.output_specs     = {{"logits", "f32", {300, 2}}, {"pred_boxes", "f32", {300, 4}}};
    h.precision        = "int8";
    h.precisions       = {"fp32", "int8"};
    h.host_cores       = true;
    return h;
}

rfdetr::decode_result round_trip(const message & m, message & out, std::vector<uint8_t> & frame) {
    frame.clear();
    rfdetr::encode_frame(m, frame);
    return rfdetr::decode_payload(frame.data() + rfdetr::k_frame_header, frame.size() - rfdetr::k_frame_header, out);
}

TEST(protocol_v4, hello_round_trips_with_its_engine_facts_after_variant) {
    std::vector<uint8_t> f;
    message              d;
    const auto           r = round_trip(v4_hello(), d, f);
    ASSERT_EQ(r.error, rfdetr::wire_error::WIRE_ERROR_NONE) << r.message;
    EXPECT_EQ(d.task, "detect");
    ASSERT_EQ(d.output_specs.size(), 2u);
    EXPECT_EQ(d.output_specs[1].name, "pred_boxes");
    EXPECT_EQ(d.output_specs[1].dtype, "f32");
    EXPECT_EQ(d.output_specs[1].shape, (std::vector<uint64_t>{300, 4}));
    EXPECT_EQ(d.precision, "int8");
    EXPECT_EQ(d.precisions, (std::vector<std::string>{"fp32", "int8"}));
    EXPECT_TRUE(d.host_cores);
    // Canonical order: ... labels, variant, task, outputs, precision, precisions, host_cores (last).
    const std::string s(f.begin(), f.end());
    const size_t      at[] = {s.find("\xa7variant"), s.find("\xa4task"), s.find("\xa7outputs"), s.find("\xa9precision\xa4"),
                              s.find("\xaaprecisions"), s.find("\xaahost_cores\xc3")};
    for (size_t i = 0; i < 6; i++) {
        ASSERT_NE(at[i], std::string::npos) << i;
        if (i > 0) {
            EXPECT_LT(at[i - 1], at[i]) << i;
        }
    }
    EXPECT_EQ(at[5] + std::strlen("\xaahost_cores\xc3"), s.size()) << "host_cores is the last key";
    std::vector<uint8_t> again;
    rfdetr::encode_frame(d, again);
    EXPECT_EQ(again, f);
}

TEST(protocol_v4, a_hello_is_judged_by_its_version_and_names_what_it_lacks) {
    message h = v4_hello();
    h.fields &= ~rfdetr::WIRE_FIELD_HOST_CORES;
    std::vector<uint8_t> f;
    message              d;
    auto                 r = round_trip(h, d, f);
    EXPECT_EQ(r.error, rfdetr::wire_error::WIRE_ERROR_FIELD);
    EXPECT_NE(r.message.find("a version-4 hello"), std::string::npos) << r.message;
    EXPECT_NE(r.message.find("it lacks 'host_cores'"), std::string::npos) << r.message;

    // A version-3 hello with the version-4 fields has no place for them.
    h                  = v4_hello();
    h.protocol_version = 3;
    r                  = round_trip(h, d, f);
    EXPECT_EQ(r.error, rfdetr::wire_error::WIRE_ERROR_FIELD);
    EXPECT_NE(r.message.find("it has no place for 'task', 'outputs', 'precision', 'precisions', 'host_cores'"),
              std::string::npos)
        << r.message;
    h.fields = rfdetr::k_hello_fields_v3;
    r        = round_trip(h, d, f);
    EXPECT_EQ(r.error, rfdetr::wire_error::WIRE_ERROR_NONE) << r.message;
}

TEST(protocol_v4, hello_outputs_must_be_f32_and_named_once) {
    message h = v4_hello();
    h.output_specs[0].dtype = "f16";
    std::vector<uint8_t> f;
    message              d;
    auto                 r = round_trip(h, d, f);
    EXPECT_EQ(r.error, rfdetr::wire_error::WIRE_ERROR_FIELD);
    EXPECT_EQ(r.message, "field 'outputs[0].dtype' is 'f16'; expected f32");
    h                     = v4_hello();
    h.output_specs[1].name = "logits";
    r                     = round_trip(h, d, f);
    EXPECT_EQ(r.error, rfdetr::wire_error::WIRE_ERROR_FIELD);
    EXPECT_EQ(r.message, "field 'outputs' names 'logits' twice");
}

TEST(protocol_v4, infer_reply_carries_outputs_by_name_right_after_ok) {
    const float logits[6] = {1, 2, 3, 4, 5, 6};
    const float boxes[4]  = {0.5f, 0.25f, 0.125f, 1};
    message     m         = rfdetr::make_ok_reply(9);
    m.fields |= rfdetr::WIRE_FIELD_OUTPUTS | rfdetr::WIRE_FIELD_PREPROCESS_MS | rfdetr::WIRE_FIELD_FORWARD_MS;
    m.outputs = {{"logits", {reinterpret_cast<const uint8_t *>(logits), sizeof(logits)}},
                 {"pred_boxes", {reinterpret_cast<const uint8_t *>(boxes), sizeof(boxes)}}};
    m.preprocess_ms = 1.5;
    m.forward_ms    = 7;
    std::vector<uint8_t> f;
    message              d;
    auto                 r = round_trip(m, d, f);
    ASSERT_EQ(r.error, rfdetr::wire_error::WIRE_ERROR_NONE) << r.message;
    ASSERT_EQ(d.outputs.size(), 2u);
    EXPECT_EQ(d.outputs[0].name, "logits");
    ASSERT_EQ(d.outputs[1].data.size, sizeof(boxes));
    EXPECT_EQ(std::memcmp(d.outputs[1].data.data, boxes, sizeof(boxes)), 0);
    // {id, ok, outputs: {logits, pred_boxes}, preprocess_ms, forward_ms}
    const std::string s(f.begin() + 4, f.end());
    EXPECT_EQ(s.substr(0, 18), std::string("\x85\xa2id\x09\xa2ok\xc3\xa7outputs\x82"));
    std::vector<uint8_t> again;
    rfdetr::encode_frame(d, again);
    EXPECT_EQ(again, f);

    // Not both forms, values binary of whole f32s, names once.
    m.fields |= rfdetr::WIRE_FIELD_V3_LOGITS;
    m.v3_logits = m.outputs[0].data;
    r           = round_trip(m, d, f);
    EXPECT_EQ(r.error, rfdetr::wire_error::WIRE_ERROR_FIELD);
    EXPECT_NE(r.message.find("exactly outputs, preprocess_ms and forward_ms"), std::string::npos) << r.message;
    m.fields &= ~rfdetr::WIRE_FIELD_V3_LOGITS;
    m.outputs[1].data.size = 3;
    r                      = round_trip(m, d, f);
    EXPECT_EQ(r.error, rfdetr::wire_error::WIRE_ERROR_FIELD);
    EXPECT_EQ(r.message, "field 'outputs.pred_boxes' must hold whole f32 values, got 3 bytes");
    m.outputs[1] = {"logits", m.outputs[0].data};
    r            = round_trip(m, d, f);
    EXPECT_EQ(r.error, rfdetr::wire_error::WIRE_ERROR_FIELD);
    EXPECT_EQ(r.message, "field 'outputs' has the key 'logits' twice");
}

}  // namespace
