// The C++ codec against the golden frames shared with the TypeScript tests, and the error table in PROTOCOL.md.
#include "protocol/protocol.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <fstream>
#include <iterator>
#include <sstream>

namespace {

using json = nlohmann::json;
using rfdetr::message;

std::vector<uint8_t> read_bytes(const std::string & path) {
    std::ifstream f(path, std::ios::binary);
    EXPECT_TRUE(f.good()) << "cannot open " << path;
    return std::vector<uint8_t>(std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>());
}

std::string hex(const rfdetr::byte_view & b) {
    static const char * digits = "0123456789abcdef";
    std::string s;
    for (size_t i = 0; i < b.size; i++) {
        s += digits[b.data[i] >> 4];
        s += digits[b.data[i] & 15];
    }
    return s;
}

// The same shape the TypeScript test builds from a decoded message (kind, id, then the fields).
json to_json(const message & m) {
    json j;
    if (m.op == rfdetr::wire_op::WIRE_OP_HELLO) {
        j["kind"]             = "hello";
        j["id"]               = m.id;
        j["protocol_version"] = m.protocol_version;
        j["sidecar_version"]  = m.sidecar_version;
        j["engine"]           = m.engine;
        j["device"]           = m.device;
        j["input_shape"]      = m.input_shape;
        j["num_queries"]      = m.num_queries;
        j["num_classes"]      = m.num_classes;
        j["labels"]           = m.labels;
        if (m.has(rfdetr::WIRE_FIELD_VARIANT)) {
            j["variant"] = m.variant;
        }
        if (m.has(rfdetr::WIRE_FIELD_TASK)) {  // version 4
            j["task"] = m.task;
            j["outputs"] = json::array();
            for (const auto & o : m.output_specs) {
                json spec = {{"name", o.name}, {"dtype", o.dtype}, {"shape", o.shape}};
                if (o.selected) {
                    spec["rows"] = "selected";
                }
                j["outputs"].push_back(spec);
            }
            j["precision"]  = m.precision;
            j["precisions"] = m.precisions;
            j["host_cores"] = m.host_cores;
        }
    } else if (m.has(rfdetr::WIRE_FIELD_OP)) {
        j["kind"] = "request";
        j["id"]   = m.id;
        j["op"]   = rfdetr::wire_op_str(m.op);
        if (m.has(rfdetr::WIRE_FIELD_PIXEL_VALUES)) {
            j["pixel_values"] = hex(m.pixel_values);
        }
        if (m.has(rfdetr::WIRE_FIELD_IMAGE)) {
            j["image"] = {{"width", m.image_width}, {"height", m.image_height}, {"rgb", hex(m.image_rgb)}};
        }
        if (m.has(rfdetr::WIRE_FIELD_IMAGE_SHM)) {
            j["image_shm"] = {{"name", m.shm_name}, {"offset", m.shm_offset}, {"length", m.shm_length},
                              {"width", m.image_width}, {"height", m.image_height}};
        }
        if (m.has(rfdetr::WIRE_FIELD_IMAGE_ENCODED)) {
            j["image_encoded"] = {{"format", m.encoded_format_name}, {"width", m.image_width},
                                  {"height", m.image_height}, {"bytes", hex(m.encoded_bytes)}};
        }
        if (m.has(rfdetr::WIRE_FIELD_SELECT)) {
            j["select"] = {{"threshold", m.select.threshold}, {"max", m.select.max}};
            if (m.select.has_classes) {
                j["select"]["classes"] = m.select.classes;
            }
            if (m.select.has_class_thresholds) {
                j["select"]["class_thresholds"] = json::object();
                for (const auto & [id, thr] : m.select.class_thresholds) {
                    j["select"]["class_thresholds"][id] = thr;
                }
            }
        }
    } else if (m.ok) {
        j["kind"] = "reply";
        j["id"]   = m.id;
        j["ok"]   = true;
        if (m.has(rfdetr::WIRE_FIELD_OUTPUTS) || m.has(rfdetr::WIRE_FIELD_V3_LOGITS)) {
            if (m.has(rfdetr::WIRE_FIELD_OUTPUTS)) {
                j["outputs"] = json::object();
                for (const auto & o : m.outputs) {
                    j["outputs"][o.name] = hex(o.data);
                }
                if (m.has(rfdetr::WIRE_FIELD_ROWS)) {
                    j["rows"] = json::object();
                    for (const auto & r : m.rows) {
                        j["rows"][r.name] = r.queries;
                    }
                }
            } else {  // a version-3 sidecar's reply
                j["logits"]     = hex(m.v3_logits);
                j["pred_boxes"] = hex(m.v3_pred_boxes);
            }
            if (m.has(rfdetr::WIRE_FIELD_DECODE_MS)) {
                j["decode_ms"] = m.decode_ms;
            }
            j["preprocess_ms"] = m.preprocess_ms;
            j["forward_ms"]    = m.forward_ms;
        }
        if (m.has(rfdetr::WIRE_FIELD_SHM)) {
            j["shm"] = {{"paths", m.shm_paths}, {"slot_bytes", m.shm_slot_bytes}};
        }
        if (m.has(rfdetr::WIRE_FIELD_DECODERS)) {
            j["decoders"] = m.decoders;
        }
    } else {
        j["kind"]  = "error";
        j["id"]    = m.id;
        j["ok"]    = false;
        j["error"] = {{"code", rfdetr::wire_error_str(m.error_code)}, {"message", m.error_message}};
    }
    return j;
}

json manifest() {
    std::ifstream f(std::string(RFDETR_FRAMES_DIR) + "/manifest.json");
    return json::parse(f);
}

// Runs a whole frame file through the length check and the payload decoder.
rfdetr::decode_result decode_file(const std::vector<uint8_t> & bytes, message & m) {
    rfdetr::decode_result r;
    if (bytes.size() < rfdetr::k_frame_header) {
        r.error = rfdetr::wire_error::WIRE_ERROR_FRAME;
        return r;
    }
    uint32_t len = 0;
    r = rfdetr::frame_length_check(bytes.data(), len);
    if (r.error != rfdetr::wire_error::WIRE_ERROR_NONE) {
        return r;
    }
    EXPECT_EQ(bytes.size(), rfdetr::k_frame_header + len);
    return rfdetr::decode_payload(bytes.data() + rfdetr::k_frame_header, len, m);
}

TEST(protocol, golden_frames_decode_to_manifest_and_reencode_identically) {
    int count = 0;
    for (const auto & e : manifest()) {
        if (!e.contains("fields")) {
            continue;
        }
        const std::string file  = e["file"];
        const auto        bytes = read_bytes(std::string(RFDETR_FRAMES_DIR) + "/" + file);
        message           m;
        auto              r = decode_file(bytes, m);
        ASSERT_EQ(r.error, rfdetr::wire_error::WIRE_ERROR_NONE) << file << ": " << r.message;
        EXPECT_EQ(to_json(m), e["fields"]) << file;
        std::vector<uint8_t> out;
        rfdetr::encode_frame(m, out);
        EXPECT_EQ(out, bytes) << file << " re-encodes differently";
        count++;
    }
    EXPECT_GE(count, 31);  // the manifest's good frames (versions 4, 3 and 2)
}

TEST(protocol, golden_bad_frames_are_rejected_with_the_manifest_code) {
    int count = 0;
    for (const auto & e : manifest()) {
        if (!e.contains("error")) {
            continue;
        }
        const std::string file  = e["file"];
        const auto        bytes = read_bytes(std::string(RFDETR_FRAMES_DIR) + "/" + file);
        message           m;
        auto              r = decode_file(bytes, m);
        EXPECT_EQ(std::string(rfdetr::wire_error_str(r.error)), e["error"].get<std::string>()) << file << ": " << r.message;
        EXPECT_EQ(r.id, e["error_id"].get<uint64_t>()) << file;
        EXPECT_GT(r.message.size(), 10u) << file;
        count++;
    }
    EXPECT_GE(count, 58);
}

TEST(protocol, duplicate_keys_are_a_frame_error) {
    // {"id":1,"op":"ping","op":"ping"}: msgpackr cannot produce this, so it is not a shared golden frame.
    const uint8_t payload[] = {0x83, 0xa2, 'i', 'd', 0x01, 0xa2, 'o', 'p', 0xa4, 'p', 'i', 'n', 'g',
                               0xa2, 'o', 'p', 0xa4, 'p', 'i', 'n', 'g'};
    message m;
    auto    r = rfdetr::decode_payload(payload, sizeof(payload), m);
    EXPECT_EQ(r.error, rfdetr::wire_error::WIRE_ERROR_FRAME);
    EXPECT_NE(r.message.find("appears twice"), std::string::npos) << r.message;
}

TEST(protocol, two_empty_keys_are_a_duplicate_without_undefined_behaviour) {
    // {"":"", "":"", "id":1}, reduced from protocol-fuzz's finding (sidecar/fuzz/corpus/protocol-fuzz/
    // finding-protocol-empty-keys): an empty key's bytes are a null pointer, which the duplicate check handed to
    // memcmp. Only UBSan sees that (scripts/ctest-sanitized.sh); the answer must be the duplicate-key error.
    const uint8_t payload[] = {0x83, 0xa0, 0xa0, 0xa0, 0xa0, 0xa2, 'i', 'd', 0x01};
    message m;
    auto    r = rfdetr::decode_payload(payload, sizeof(payload), m);
    EXPECT_EQ(r.error, rfdetr::wire_error::WIRE_ERROR_FRAME);
    EXPECT_NE(r.message.find("key '' appears twice"), std::string::npos) << r.message;
}

TEST(protocol, deep_nesting_is_refused_without_recursion) {
    std::vector<uint8_t> payload(100000, 0x91);  // fixarray(1) nested 100000 deep
    payload.push_back(0x01);
    message m;
    auto    r = rfdetr::decode_payload(payload.data(), payload.size(), m);
    EXPECT_EQ(r.error, rfdetr::wire_error::WIRE_ERROR_FRAME);
}

TEST(protocol, length_check_bounds) {
    uint32_t      len = 0;
    const uint8_t zero[4] = {0, 0, 0, 0};
    const uint8_t cap[4]  = {0x00, 0x00, 0x01, 0x0c};  // 201392128 = 8192*8192*3 + 65536
    const uint8_t over[4] = {0x01, 0x00, 0x01, 0x0c};
    EXPECT_EQ(rfdetr::frame_length_check(zero, len).error, rfdetr::wire_error::WIRE_ERROR_FRAME);
    EXPECT_EQ(rfdetr::frame_length_check(cap, len).error, rfdetr::wire_error::WIRE_ERROR_NONE);
    EXPECT_EQ(len, rfdetr::k_max_frame_bytes);
    EXPECT_EQ(len, 8192u * 8192u * 3u + 65536u);
    auto r = rfdetr::frame_length_check(over, len);
    EXPECT_EQ(r.error, rfdetr::wire_error::WIRE_ERROR_FRAME);
    EXPECT_NE(r.message.find("201392129 exceeds the 201392128-byte cap"), std::string::npos) << r.message;
}

TEST(protocol, infer_needs_exactly_one_input_and_names_the_fields) {
    // Built with the encoder (the golden frames carry the TS encoder's bytes for the same cases).
    const uint8_t rgb[6] = {1, 2, 3, 4, 5, 6};
    message       req;
    req.id           = 9;
    req.op           = rfdetr::wire_op::WIRE_OP_INFER;
    req.fields       = rfdetr::WIRE_FIELD_OP | rfdetr::WIRE_FIELD_IMAGE;
    req.image_width  = 2;
    req.image_height = 1;
    req.image_rgb    = {rgb, sizeof(rgb)};
    std::vector<uint8_t> f;
    rfdetr::encode_frame(req, f);
    message m;
    auto    r = rfdetr::decode_payload(f.data() + 4, f.size() - 4, m);
    ASSERT_EQ(r.error, rfdetr::wire_error::WIRE_ERROR_NONE) << r.message;
    EXPECT_EQ(m.image_width, 2u);
    EXPECT_EQ(m.image_height, 1u);
    ASSERT_EQ(m.image_rgb.size, 6u);
    EXPECT_EQ(m.image_rgb.data[5], 6);

    req.fields |= rfdetr::WIRE_FIELD_PIXEL_VALUES;
    req.pixel_values = {rgb, 4};
    f.clear();
    rfdetr::encode_frame(req, f);
    r = rfdetr::decode_payload(f.data() + 4, f.size() - 4, m);
    EXPECT_EQ(r.error, rfdetr::wire_error::WIRE_ERROR_FIELD);
    EXPECT_NE(r.message.find("both 'image' and 'pixel_values'"), std::string::npos) << r.message;

    req.fields = rfdetr::WIRE_FIELD_OP;
    f.clear();
    rfdetr::encode_frame(req, f);
    r = rfdetr::decode_payload(f.data() + 4, f.size() - 4, m);
    EXPECT_EQ(r.error, rfdetr::wire_error::WIRE_ERROR_FIELD);
    EXPECT_NE(r.message.find("neither 'image' nor 'pixel_values'"), std::string::npos) << r.message;
}

TEST(protocol, input_map_errors_name_the_field_and_what_was_expected) {
    // The messages an infer request's input maps (image, image_shm, image_encoded) get, pinned: one map walker
    // (decode_keyed_map) writes them all, so a change to it shows here as a changed sentence.
    const std::pair<const char *, const char *> cases[] = {
        {"bad-infer-image-encoded-bytes-not-bin.bin",
         "field 'image_encoded.bytes' must be binary (the image file), got string"},
        {"bad-infer-image-encoded-format-not-str.bin",
         "field 'image_encoded.format' must be a string (\"jpeg\" or \"png\"), got unsigned integer"},
        {"bad-infer-image-encoded-height-not-uint.bin",
         "field 'image_encoded.height' must be an unsigned integer, got float64"},
        {"bad-infer-image-encoded-no-bytes.bin",
         "field 'image_encoded' lacks 'bytes'; expected {format, width, height, bytes}"},
        {"bad-infer-image-encoded-unknown-key.bin",
         "field 'image_encoded' has an unknown or repeated key 'quality'; expected format, width, height, bytes"},
        {"bad-infer-image-no-rgb.bin",
         "field 'image' lacks 'rgb'; expected {width, height, rgb}"},
        {"bad-infer-image-not-map.bin",
         "field 'image' must be a map {width, height, rgb}, got binary"},
        {"bad-infer-image-rgb-not-bin.bin",
         "field 'image.rgb' must be binary (RGB u8, row-major), got string"},
        {"bad-infer-image-shm-name-not-str.bin",
         "field 'image_shm.name' must be a string (a slot file's name), got unsigned integer"},
        {"bad-infer-image-shm-no-length.bin",
         "field 'image_shm' lacks 'length'; expected {name, offset, length, width, height}"},
        {"bad-infer-image-shm-offset-negative.bin",
         "field 'image_shm.offset' must be an unsigned integer, got negative integer"},
        {"bad-infer-image-shm-unknown-key.bin",
         "field 'image_shm' has an unknown or repeated key 'fd'; expected name, offset, length, width, height"},
        {"bad-infer-image-unknown-key.bin",
         "field 'image' has an unknown or repeated key 'depth'; expected width, height, rgb"},
        {"bad-infer-image-width-not-uint.bin",
         "field 'image.width' must be an unsigned integer, got negative integer"},
    };
    for (const auto & [file, want] : cases) {
        const auto bytes = read_bytes(std::string(RFDETR_FRAMES_DIR) + "/" + file);
        ASSERT_GT(bytes.size(), 4u) << file;
        message m;
        const auto r = rfdetr::decode_payload(bytes.data() + 4, bytes.size() - 4, m);
        EXPECT_EQ(r.error, rfdetr::wire_error::WIRE_ERROR_FIELD) << file;
        EXPECT_EQ(r.message, want) << file;
    }
}

TEST(protocol, error_table_matches_protocol_md) {
    std::ifstream     f(RFDETR_PROTOCOL_MD);
    std::stringstream ss;
    ss << f.rdbuf();
    const std::string doc   = ss.str();
    const auto        begin = doc.find("<!-- error-codes:begin -->");
    const auto        end   = doc.find("<!-- error-codes:end -->");
    ASSERT_NE(begin, std::string::npos);
    ASSERT_NE(end, std::string::npos);
    std::istringstream lines(doc.substr(begin, end - begin));
    std::string        line;
    std::vector<std::pair<std::string, bool>> from_doc;
    while (std::getline(lines, line)) {
        if (line.rfind("| `E_", 0) != 0) {
            continue;
        }
        const auto code_end = line.find('`', 3);
        const auto cell2    = line.find('|', code_end);
        const auto cell3    = line.find('|', cell2 + 1);
        std::string closes  = line.substr(cell2 + 1, cell3 - cell2 - 1);
        from_doc.emplace_back(line.substr(3, code_end - 3), closes.find("yes") != std::string::npos);
    }
    std::vector<std::pair<std::string, bool>> from_header;
    for (const auto & e : rfdetr::k_wire_errors) {
        from_header.emplace_back(e.name, e.closes_connection);
    }
    EXPECT_EQ(from_header, from_doc);
}

}  // namespace
