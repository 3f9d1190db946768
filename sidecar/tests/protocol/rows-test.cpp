// Selected rows through the C++ codec (PROTOCOL.md, "Selected rows"): the hello output entry's `rows`, the
// infer request's `select` and the reply's `rows`: round trips, canonical order, and what a malformed one is
// told. The golden frames (protocol-test.cpp) hold the TypeScript encoder's bytes for the same forms.
#include "protocol/protocol.h"

#ifndef MSGPACK_NO_BOOST
#define MSGPACK_NO_BOOST
#endif
#include <msgpack.hpp>

#include <gtest/gtest.h>

#include <cstring>

namespace {

using rfdetr::message;

rfdetr::decode_result round_trip(const message & m, message & out, std::vector<uint8_t> & frame) {
    frame.clear();
    rfdetr::encode_frame(m, frame);
    return rfdetr::decode_payload(frame.data() + rfdetr::k_frame_header, frame.size() - rfdetr::k_frame_header, out);
}

using packer = msgpack::packer<msgpack::sbuffer>;

// Decodes the payload `write` packs (a malformed message written value by value).
template <typename Write>
rfdetr::decode_result decode_packed(Write write, message & out) {
    msgpack::sbuffer b;
    packer           pk(b);
    write(pk);
    return rfdetr::decode_payload(reinterpret_cast<const uint8_t *>(b.data()), b.size(), out);
}

message segment_hello() {
    message h;
    h.fields           = rfdetr::k_hello_fields;
    h.op               = rfdetr::wire_op::WIRE_OP_HELLO;
    h.ok               = true;
    h.protocol_version = rfdetr::k_protocol_version;
    h.sidecar_version  = "0.1.0";
    h.engine           = "cpu";
    h.device           = "test";
    h.input_shape      = {3, 312, 312};
    h.num_queries      = 100;
    h.num_classes      = 2;
    h.labels           = {"N/A", "person"};
    h.variant          = "seg-nano";
    h.task             = "segment";
    h.output_specs     = {{"logits", "f32", {100, 2}}, {"pred_boxes", "f32", {100, 4}}, {"pred_masks", "f32", {100, 78, 78}, true}};
    h.precision        = "fp32";
    h.precisions       = {"fp32"};
    h.host_cores       = true;
    return h;
}

message infer_with_select() {
    static const uint8_t rgb[3] = {1, 2, 3};
    message              m;
    m.id                        = 5;
    m.op                        = rfdetr::wire_op::WIRE_OP_INFER;
    m.fields                    = rfdetr::WIRE_FIELD_OP | rfdetr::WIRE_FIELD_IMAGE | rfdetr::WIRE_FIELD_SELECT;
    m.image_width               = 1;
    m.image_height              = 1;
    m.image_rgb                 = {rgb, 3};
    m.select.threshold          = 0.25;
    m.select.max                = 100;
    m.select.has_classes        = true;
    m.select.classes            = {1, 3};
    m.select.has_class_thresholds = true;
    m.select.class_thresholds   = {{"3", 0.5}, {"1", 1}};
    return m;
}

TEST(protocol_rows, a_selected_hello_output_says_rows_selected_after_its_shape) {
    std::vector<uint8_t> f;
    message              d;
    const auto           r = round_trip(segment_hello(), d, f);
    ASSERT_EQ(r.error, rfdetr::wire_error::WIRE_ERROR_NONE) << r.message;
    ASSERT_EQ(d.output_specs.size(), 3u);
    EXPECT_FALSE(d.output_specs[0].selected || d.output_specs[1].selected);
    EXPECT_TRUE(d.output_specs[2].selected);
    EXPECT_EQ(d.output_specs[2].shape, (std::vector<uint64_t>{100, 78, 78}));
    const std::string s(f.begin(), f.end());
    EXPECT_NE(s.find("\x84\xa4name\xaapred_masks\xa5" "dtype\xa3" "f32\xa5shape\x93\x64\x4e\x4e\xa4rows\xa8selected"),
              std::string::npos);
    EXPECT_EQ(s.find("rows", s.find("pred_boxes")), s.find("rows", s.find("pred_masks"))) << "only the selected output has rows";
    std::vector<uint8_t> again;
    rfdetr::encode_frame(d, again);
    EXPECT_EQ(again, f);

    // `rows` has one value, and a selected output needs an axis 0.
    const auto hello_output = [&d](const char * rows, uint32_t axes) {
        return decode_packed([&](packer & pk) {
            pk.pack_map(3);
            pk.pack("id"), pk.pack(0), pk.pack("op"), pk.pack("hello");
            pk.pack("outputs"), pk.pack_array(1), pk.pack_map(4);
            pk.pack("name"), pk.pack("m"), pk.pack("dtype"), pk.pack("f32"), pk.pack("shape"), pk.pack_array(axes);
            for (uint32_t i = 0; i < axes; i++) {
                pk.pack(2);
            }
            pk.pack("rows"), pk.pack(rows);
        }, d);
    };
    EXPECT_EQ(hello_output("all", 1).message, "field 'outputs[0].rows' is 'all'; expected selected (or no rows key)");
    EXPECT_EQ(hello_output("selected", 0).message,
              "field 'outputs[0]' selects rows but its shape has no axis 0 to select along");
}

TEST(protocol_rows, select_round_trips_after_the_image_with_its_keys_in_order) {
    std::vector<uint8_t> f;
    message              d;
    const auto           r = round_trip(infer_with_select(), d, f);
    ASSERT_EQ(r.error, rfdetr::wire_error::WIRE_ERROR_NONE) << r.message;
    ASSERT_TRUE(d.has(rfdetr::WIRE_FIELD_SELECT));
    EXPECT_EQ(d.select.threshold, 0.25);
    EXPECT_EQ(d.select.max, 100u);
    EXPECT_TRUE(d.select.has_classes);
    EXPECT_EQ(d.select.classes, (std::vector<uint64_t>{1, 3}));
    ASSERT_EQ(d.select.class_thresholds.size(), 2u);
    EXPECT_EQ(d.select.class_thresholds[0], (std::pair<std::string, double>{"3", 0.5}));
    EXPECT_EQ(d.select.class_thresholds[1], (std::pair<std::string, double>{"1", 1.0}));
    // ... image {...}, select {threshold: f64, max, classes, class_thresholds {"3": f64, "1": 1 (an integer)}}
    const std::string s(f.begin(), f.end());
    const size_t      sel = s.find("\xa6select\x84\xa9threshold\xcb");
    ASSERT_NE(sel, std::string::npos);
    EXPECT_GT(sel, s.find("\xa5image"));
    EXPECT_NE(s.find("\xa3max\x64\xa7" "classes\x92\x01\x03\xb0" "class_thresholds\x82\xa1" "3\xcb"), std::string::npos);
    EXPECT_EQ(s.substr(s.size() - 3), std::string("\xa1" "1\x01", 3)) << "an integral threshold is written as an integer";
    std::vector<uint8_t> again;
    rfdetr::encode_frame(d, again);
    EXPECT_EQ(again, f);

    // The optional keys may be absent; then the map has two.
    message m                    = infer_with_select();
    m.select.has_classes         = false;
    m.select.has_class_thresholds = false;
    ASSERT_EQ(round_trip(m, d, f).error, rfdetr::wire_error::WIRE_ERROR_NONE);
    EXPECT_FALSE(d.select.has_classes || d.select.has_class_thresholds);
    EXPECT_NE(std::string(f.begin(), f.end()).find("\xa6select\x82"), std::string::npos);
}

TEST(protocol_rows, a_negative_integral_threshold_round_trips_for_the_server_to_refuse) {
    // protocol-fuzz (sidecar/fuzz/corpus/protocol-fuzz/finding-protocol-negative-threshold): msgpack-cxx writes the
    // double -1.0 as the integer -1, which the codec refused as "not a number", so a decoded select did not decode
    // again. A negative integer is a number; its range is the server's to refuse (dispatch.cpp, E_FIELD).
    for (const double thr : {-1.0, -4294967296.0}) {
        message m          = infer_with_select();
        m.select.threshold = thr;
        m.select.class_thresholds[0].second = thr;
        message              d;
        std::vector<uint8_t> f;
        const auto           r = round_trip(m, d, f);
        ASSERT_EQ(r.error, rfdetr::wire_error::WIRE_ERROR_NONE) << r.message;
        EXPECT_EQ(d.select.threshold, thr);
        EXPECT_EQ(d.select.class_thresholds[0].second, thr);
    }
}

TEST(protocol_rows, a_threshold_of_2_to_the_64_round_trips_without_undefined_behaviour) {
    // protocol-fuzz (sidecar/fuzz/corpus/protocol-fuzz/finding-protocol-threshold-2p64): a class threshold sent as
    // the uint64 maximum decodes to the double 2^64, and msgpack-cxx's pack_double converted that to uint64_t
    // (undefined: only UBSan sees it, scripts/ctest-sanitized.sh). It must encode, and decode to the same value.
    message m = infer_with_select();
    m.select.threshold                  = 18446744073709551616.0;
    m.select.class_thresholds[0].second = 18446744073709551616.0;
    message              d;
    std::vector<uint8_t> f;
    const auto           r = round_trip(m, d, f);
    ASSERT_EQ(r.error, rfdetr::wire_error::WIRE_ERROR_NONE) << r.message;
    EXPECT_EQ(d.select.threshold, 18446744073709551616.0);
    EXPECT_EQ(d.select.class_thresholds[0].second, 18446744073709551616.0);
    std::vector<uint8_t> again;
    rfdetr::encode_frame(d, again);
    EXPECT_EQ(again, f) << "the re-encoding is canonical";
}

TEST(protocol_rows, a_malformed_select_is_a_field_error_naming_what_was_expected) {
    message d;
    // {id: 5, op: infer, pixel_values: bin(4), select: <sel>}
    const auto err = [&d](auto sel) {
        auto r = decode_packed([&](packer & pk) {
            pk.pack_map(4);
            pk.pack("id"), pk.pack(5), pk.pack("op"), pk.pack("infer");
            pk.pack("pixel_values"), pk.pack_bin(4), pk.pack_bin_body("\0\0\0\0", 4);
            pk.pack("select");
            sel(pk);
        }, d);
        EXPECT_EQ(r.error, rfdetr::wire_error::WIRE_ERROR_FIELD) << r.message;
        return r.message;
    };
    const auto thr_max = [](packer & pk, uint32_t keys) {
        pk.pack_map(keys), pk.pack("threshold"), pk.pack(0), pk.pack("max"), pk.pack(1);
    };
    EXPECT_EQ(err([](packer & pk) { pk.pack(1); }),
              "field 'select' must be a map {threshold, max, classes, class_thresholds}, got unsigned integer");
    EXPECT_EQ(err([](packer & pk) { pk.pack_map(1), pk.pack("max"), pk.pack(1); }),
              "field 'select' lacks 'threshold'; expected {threshold, max, classes, class_thresholds}");
    EXPECT_EQ(err([](packer & pk) { pk.pack_map(2), pk.pack("threshold"), pk.pack("x"), pk.pack("max"), pk.pack(1); }),
              "field 'select.threshold' must be a number, got string");
    EXPECT_EQ(err([](packer & pk) { pk.pack_map(2), pk.pack("threshold"), pk.pack(0), pk.pack("max"), pk.pack(-1); }),
              "field 'select.max' must be an unsigned integer, got negative integer");
    EXPECT_EQ(err([&](packer & pk) { thr_max(pk, 3), pk.pack("classes"), pk.pack_array(1), pk.pack("1"); }),
              "field 'select.classes' must be an array of unsigned integers (class ids), got string");
    EXPECT_EQ(err([&](packer & pk) { thr_max(pk, 3), pk.pack("class_thresholds"), pk.pack_map(1), pk.pack(1), pk.pack(0); }),
              "field 'select.class_thresholds' must be a map with string keys (class ids as decimal strings), got "
              "unsigned integer");
    EXPECT_EQ(err([&](packer & pk) { thr_max(pk, 3), pk.pack("class_thresholds"), pk.pack_map(1), pk.pack("1"), pk.pack(false); }),
              "field 'select.class_thresholds.1' must be a number, got boolean");
    EXPECT_EQ(err([&](packer & pk) { thr_max(pk, 3), pk.pack("top"), pk.pack(1); }),
              "field 'select' has an unknown or repeated key 'top'; expected threshold, max, classes, class_thresholds");
    // Only an infer request carries it.
    auto r = decode_packed([&](packer & pk) {
        pk.pack_map(3), pk.pack("id"), pk.pack(5), pk.pack("op"), pk.pack("ping"), pk.pack("select");
        thr_max(pk, 2);
    }, d);
    EXPECT_EQ(r.error, rfdetr::wire_error::WIRE_ERROR_FIELD);
    EXPECT_EQ(r.message, "field 'select' is not part of a 'ping' request");
}

TEST(protocol_rows, an_infer_reply_names_each_selected_output_rows_right_after_outputs) {
    const float logits[2] = {1, 2};
    const float masks[2]  = {0.5f, -1};
    message     m         = rfdetr::make_ok_reply(9);
    m.fields |= rfdetr::WIRE_FIELD_OUTPUTS | rfdetr::WIRE_FIELD_ROWS | rfdetr::WIRE_FIELD_PREPROCESS_MS | rfdetr::WIRE_FIELD_FORWARD_MS;
    m.outputs = {{"logits", {reinterpret_cast<const uint8_t *>(logits), sizeof(logits)}},
                 {"pred_masks", {reinterpret_cast<const uint8_t *>(masks), sizeof(masks)}}};
    m.rows    = {{"pred_masks", {7, 0}}};
    m.forward_ms = 3;
    std::vector<uint8_t> f;
    message              d;
    auto                 r = round_trip(m, d, f);
    ASSERT_EQ(r.error, rfdetr::wire_error::WIRE_ERROR_NONE) << r.message;
    ASSERT_EQ(d.rows.size(), 1u);
    EXPECT_EQ(d.rows[0].name, "pred_masks");
    EXPECT_EQ(d.rows[0].queries, (std::vector<uint64_t>{7, 0}));
    const std::string s(f.begin(), f.end());
    EXPECT_NE(s.find(std::string("\xa4rows\x81\xaapred_masks\x92\x07\x00\xadpreprocess_ms", 31)), std::string::npos);
    EXPECT_GT(s.find("\xa4rows"), s.find("\xa7outputs"));
    std::vector<uint8_t> again;
    rfdetr::encode_frame(d, again);
    EXPECT_EQ(again, f);

    // An empty selection is an empty array; rows never come without outputs.
    m.rows = {{"pred_masks", {}}};
    ASSERT_EQ(round_trip(m, d, f).error, rfdetr::wire_error::WIRE_ERROR_NONE);
    EXPECT_TRUE(d.rows[0].queries.empty());
    m.fields &= ~rfdetr::WIRE_FIELD_OUTPUTS;
    r = round_trip(m, d, f);
    EXPECT_EQ(r.error, rfdetr::wire_error::WIRE_ERROR_FIELD);
    EXPECT_NE(r.message.find("and rows for a selected output"), std::string::npos) << r.message;
    // {id: 9, ok: true, rows: {m: [-1]}} and {rows: {m: 1}}
    const auto reply_rows = [&d](auto value) {
        return decode_packed([&](packer & pk) {
            pk.pack_map(3), pk.pack("id"), pk.pack(9), pk.pack("ok"), pk.pack(true), pk.pack("rows"), pk.pack_map(1);
            pk.pack("m");
            value(pk);
        }, d).message;
    };
    EXPECT_EQ(reply_rows([](packer & pk) { pk.pack_array(1), pk.pack(-1); }),
              "field 'rows.m' must be an array of unsigned integers (query indices), got negative integer");
    EXPECT_EQ(reply_rows([](packer & pk) { pk.pack(1); }),
              "field 'rows.m' must be an array of unsigned integers (query indices), got unsigned integer");
}

}  // namespace
