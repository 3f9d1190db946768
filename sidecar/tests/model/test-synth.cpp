// The synthetic generator: bit-exact with rfdetr-synth SPEC v1 (worked example and the first 4 values of
// all 487 tensors from weights_check_seed0x1.json), seed parsing, the written files.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <cstring>

#include "common/error.h"
#include "model/checkpoint.h"
#include "model/safetensors.h"
#include "model/schema.h"
#include "model/synth.h"
#include "test-util.h"

using namespace rfdetr_test;

namespace {

uint32_t bits(float f) {
    uint32_t u;
    std::memcpy(&u, &f, 4);
    return u;
}

}  // namespace

TEST(Schema, EmbeddedTextsEqualTheFilesInTheTree) {
    EXPECT_EQ(std::string(rfdetr::schema_json_text()), read_file(RFDETR_SCHEMA_JSON));
    EXPECT_EQ(std::string(rfdetr::coco_config_json_text()), read_file(RFDETR_COCO_CONFIG_JSON));
    const auto & sch = rfdetr::schema_get();
    EXPECT_EQ(sch.num_classes, 91);
    int class_dependent = 0;
    for (const auto & st : sch.tensors) {
        class_dependent += st.class_axis >= 0;
        EXPECT_EQ(sch.find(st.name), &st);
    }
    EXPECT_EQ(class_dependent, 28);  // class_embed + 13 enc_out_class_embed groups, weight and bias each
    EXPECT_EQ(sch.find("class_embed.weight")->shape_for(7), (std::vector<int64_t>{ 7, 256 }));
    EXPECT_EQ(sch.find("nope"), nullptr);
}

TEST(Synth, WorkedExampleOfTheSpec) {
    EXPECT_EQ(rfdetr::synth_fnv1a64("class_embed.bias"), 0x4ca32d7098b06ad8ull);
    EXPECT_EQ(rfdetr::synth_mix(0xeadaa72a17fae6eeull), 0xc3a7b5175bcc1711ull);
    float v[3];
    rfdetr::synth_fill(v, 1, "class_embed.bias", 3, -6.5, 0.25);
    EXPECT_EQ(bits(v[0]), 0xc0cbc585u);
    EXPECT_EQ(bits(v[1]), 0xc0c9e5b7u);
    EXPECT_EQ(bits(v[2]), 0xc0d348b9u);
    rfdetr::synth_fill(v, 1, "backbone.0.encoder.encoder.encoder.layer.0.attention.attention.query.weight", 3, 0, 0.125);
    EXPECT_EQ(bits(v[0]), 0x3db873cau);
    EXPECT_EQ(bits(v[1]), 0x3d33c1b4u);
    EXPECT_EQ(bits(v[2]), 0xbde90c88u);
    // `first` continues the same stream.
    float w[2];
    rfdetr::synth_fill(w, 1, "class_embed.bias", 2, -6.5, 0.25, 1);
    EXPECT_EQ(bits(w[0]), 0xc0c9e5b7u);
    EXPECT_EQ(bits(w[1]), 0xc0d348b9u);
}

TEST(Synth, First4OfAll487TensorsMatchWeightsCheck) {
    const auto check = nlohmann::json::parse(read_file(RFDETR_WEIGHTS_CHECK_JSON));
    ASSERT_EQ(check.at("seed").get<int>(), 1);
    const auto & tensors = check.at("tensors");
    const auto & sch     = rfdetr::schema_get();
    ASSERT_EQ(tensors.size(), 487u);
    ASSERT_EQ(sch.tensors.size(), 487u);
    for (const auto & st : sch.tensors) {
        SCOPED_TRACE(st.name);
        ASSERT_TRUE(tensors.contains(st.name));
        const auto & c = tensors.at(st.name);
        // The embedded schema agrees with the spec's check file on shape and rule.
        EXPECT_EQ(c.at("shape").get<std::vector<int64_t>>(), st.shape);
        EXPECT_EQ(c.at("rule").get<std::string>(), st.rule);
        EXPECT_EQ(c.at("A").get<double>(), st.a);
        EXPECT_EQ(c.at("S").get<double>(), st.s);
        float v[4];
        rfdetr::synth_fill(v, 1, st.name, 4, st.a, st.s);
        for (int i = 0; i < 4; i++) {
            EXPECT_EQ(bits(v[i]), std::stoul(c.at("first4_f32_hex")[i].get<std::string>(), nullptr, 16)) << i;
        }
    }
}

TEST(Synth, ParsesSeeds) {
    uint64_t v = 0;
    EXPECT_TRUE(rfdetr::synth_parse_u64("0", v));
    EXPECT_EQ(v, 0u);
    EXPECT_TRUE(rfdetr::synth_parse_u64("42", v));
    EXPECT_EQ(v, 42u);
    EXPECT_TRUE(rfdetr::synth_parse_u64("0x1", v));
    EXPECT_EQ(v, 1u);
    EXPECT_TRUE(rfdetr::synth_parse_u64("0XdeadBEEF", v));
    EXPECT_EQ(v, 0xdeadbeefu);
    EXPECT_TRUE(rfdetr::synth_parse_u64("18446744073709551615", v));
    EXPECT_EQ(v, ~uint64_t(0));
    EXPECT_TRUE(rfdetr::synth_parse_u64("0xffffffffffffffff", v));
    EXPECT_EQ(v, ~uint64_t(0));
    for (const char * bad : { "", "0x", "-1", "+1", " 1", "1 ", "1e3", "0x1g", "12a", "18446744073709551616",
                              "0x10000000000000000", "99999999999999999999999" }) {
        EXPECT_FALSE(rfdetr::synth_parse_u64(bad, v)) << bad;
    }
    EXPECT_EQ(rfdetr::synth_seed_hex(1), "0x1");
    EXPECT_EQ(rfdetr::synth_seed_hex(0xdeadbeef), "0xdeadbeef");
    EXPECT_EQ(rfdetr::synth_seed_hex(0), "0x0");
}

TEST(Synth, HeaderIsSortedPaddedAndValid) {
    rfdetr::synth_options opts;
    opts.seed               = 0xfedcba9876543210ull;
    const std::string h     = rfdetr::synth_header(opts);
    EXPECT_EQ(h.size() % 8, 0u);
    uint64_t data = 0;
    for (const auto & st : rfdetr::schema_get().tensors) {
        data += static_cast<uint64_t>(st.numel_for(91)) * 4;
    }
    EXPECT_EQ(data, 32174530ull * 4);  // SPEC: 32,174,530 values
    std::vector<uint8_t> bytes(h.begin(), h.end());
    bytes.resize(h.size() + data);
    const auto hd = rfdetr::safetensors_parse("synth", bytes.data(), bytes.size());
    EXPECT_EQ(hd.metadata.at("format"), "pt");
    EXPECT_EQ(hd.metadata.at("synthetic"), "true");
    EXPECT_EQ(hd.metadata.at("seed"), "0xfedcba9876543210");
    // Data laid out in byte-wise sorted key order.
    uint64_t off = 0;
    for (const auto & t : hd.tensors) {  // sorted by name
        EXPECT_EQ(t.begin, off) << t.name;
        off = t.end;
    }
    EXPECT_EQ(rfdetr::checkpoint_check_tensors("synth", hd), 91);
}

TEST(Synth, WritesALoadableCheckpointWithOtherClassCounts) {
    const std::string     dir = fresh_dir("synth-7") + "/nested/out";
    rfdetr::synth_options opts;
    opts.seed        = 0x123456789abcdef0ull;
    opts.num_classes = 7;
    rfdetr::synth_write(dir, opts);
    auto ck = rfdetr::checkpoint::open(dir);
    EXPECT_EQ(ck->num_classes(), 7);
    EXPECT_TRUE(ck->synthetic());
    EXPECT_EQ(ck->labels(), (std::vector<std::string>{ "class_0", "class_1", "class_2", "class_3", "class_4",
                                                       "class_5", "class_6" }));
    const auto & b = ck->get("class_embed.bias");
    ASSERT_EQ(b.shape, (std::vector<int64_t>{ 7 }));
    float want[7];
    rfdetr::synth_fill(want, opts.seed, "class_embed.bias", 7, -6.5, 0.25);
    for (int i = 0; i < 7; i++) {
        EXPECT_EQ(b.data[i], want[i]);
    }
    const auto cfg = nlohmann::json::parse(read_file(dir + "/config.json"));
    EXPECT_EQ(cfg.at("synthetic"), true);
    EXPECT_EQ(cfg.at("num_labels"), 7);
    EXPECT_EQ(cfg.at("label2id").at("class_6"), 6);
    // No temporary files are left behind.
    EXPECT_EQ(std::system(("test -z \"$(ls -A '" + dir + "' | grep -v -x -e model.safetensors -e config.json)\"").c_str()), 0);
}

TEST(Synth, WriteFailureLeavesNothing) {
    const std::string dir = fresh_dir("synth-fail");
    write_file(dir + "/file", "x");
    try {
        rfdetr::synth_write(dir + "/file/out", {});
        ADD_FAILURE() << "no error";
    } catch (const rfdetr::error & e) {
        EXPECT_NE(std::string(e.what()).find(dir + "/file"), std::string::npos) << e.what();
    }
    // model.safetensors exists as a directory: the rename fails, the temporary file is removed.
    const std::string blocked = fresh_dir("synth-blocked");
    (void) !std::system(("mkdir -p '" + blocked + "/model.safetensors/x'").c_str());
    EXPECT_THROW(rfdetr::synth_write(blocked, {}), rfdetr::error);
    EXPECT_EQ(std::system(("test -z \"$(ls -A '" + blocked + "' | grep tmp)\"").c_str()), 0);
    EXPECT_THROW(rfdetr::synth_write(blocked, { 1, 0 }), rfdetr::error);
}
