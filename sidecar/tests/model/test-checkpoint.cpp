// checkpoint::open: strict key set, shapes, class count, config.json; the real seed-1 checkpoint loads fast.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <climits>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <fstream>

#include "engines/engine.h"
#include "model/checkpoint.h"
#include "model/schema.h"
#include "model/synth.h"
#include "test-util.h"

using namespace rfdetr_test;

namespace {

std::string labels_config(int n) {
    return coco_config([n](nlohmann::ordered_json & j) {
        nlohmann::ordered_json m = nlohmann::ordered_json::object();
        for (int i = 0; i < n; i++) {
            m[std::to_string(i)] = "thing_" + std::to_string(i);
        }
        j["id2label"]   = m;
        j["num_labels"] = n;
    });
}

}  // namespace

TEST(Checkpoint, SchemaLayoutWithCocoConfigLoads) {
    const std::string dir = make_checkpoint("coco", schema_tensors(), read_file(RFDETR_COCO_CONFIG_JSON));
    auto              ck  = rfdetr::checkpoint::open(dir);
    EXPECT_EQ(ck->num_classes(), 91);
    ASSERT_EQ(ck->labels().size(), 91u);
    EXPECT_EQ(ck->labels()[0], "N/A");
    EXPECT_EQ(ck->labels()[1], "person");
    EXPECT_EQ(ck->labels()[12], "N/A");
    EXPECT_EQ(ck->labels()[90], "toothbrush");
    EXPECT_FALSE(ck->synthetic());
    EXPECT_EQ(ck->dir(), dir);
    const auto & t = ck->get("class_embed.weight");
    EXPECT_EQ(t.shape, (std::vector<int64_t>{ 91, 256 }));
    EXPECT_EQ(t.numel(), 91 * 256);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(t.data) % alignof(float), 0u);
    EXPECT_THROW(ck->get("class_embed.weights"), rfdetr::error);
}

TEST(Checkpoint, FixtureConfigLoads) {
    // The shared fixtures' reconstructed config.json (copied into test/fixtures) must load.
    const std::string dir = make_checkpoint("fixture-config", schema_tensors(), read_file(RFDETR_FIXTURE_CONFIG_JSON));
    auto              ck  = rfdetr::checkpoint::open(dir);
    EXPECT_EQ(ck->labels()[1], "person");
}

TEST(Checkpoint, UnpaddedHeaderStillLoadsAligned) {
    const std::string dir  = fresh_dir("unpadded");
    uint64_t          data = 0;
    const std::string h    = make_header(schema_tensors(), &data, /*pad_to=*/1);
    ASSERT_NE(h.size() % 4, 0u) << "test needs a header length that is not a multiple of 4";
    write_sparse(dir + "/model.safetensors", h, data);
    write_file(dir + "/config.json", read_file(RFDETR_COCO_CONFIG_JSON));
    auto ck = rfdetr::checkpoint::open(dir);
    const auto & t = ck->get("query_feat.weight");
    EXPECT_EQ(reinterpret_cast<uintptr_t>(t.data) % alignof(float), 0u);
    EXPECT_EQ(t.data[0], 0.0f);
    EXPECT_EQ(t.data[t.numel() - 1], 0.0f);
}

TEST(Checkpoint, MissingAndUnexpectedKeysAreListed) {
    auto ts = schema_tensors();
    std::vector<std::string> removed;
    for (int i = 0; i < 25; i++) {  // drop 25 keys from the middle
        removed.push_back(ts[100].name);
        ts.erase(ts.begin() + 100);
    }
    ts.push_back({ "model.extra.weight", { 4 } });
    ts.push_back({ "ema.class_embed.weight", { 91, 256 } });
    ts.push_back({ "z.unexpected", { 1 } });
    const std::string msg = open_error(make_checkpoint("keys", ts, read_file(RFDETR_COCO_CONFIG_JSON)));
    EXPECT_HAS(msg, "/keys/model.safetensors: not an RF-DETR checkpoint of a supported variant");
    EXPECT_HAS(msg, "the closest is RF-DETR-base (487-tensor schema: 25 missing, 3 unexpected)");
    EXPECT_HAS(msg, "Supported: RF-DETR detection and segmentation (Seg) checkpoints of the variants base (RF-DETR-base), nano (RF-DETR-Nano)");
    EXPECT_HAS(msg, "missing (25):");
    EXPECT_HAS(msg, "... and 5 more");
    std::vector<std::string> sorted = removed;  // the list follows the schema order
    for (size_t i = 0; i < 20; i++) {
        EXPECT_HAS(msg, "\n    " + removed[i] + "\n");
    }
    EXPECT_EQ(msg.find(removed[20] + "\n"), std::string::npos) << "only the first 20 are listed";
    EXPECT_HAS(msg, "unexpected (3):\n    ema.class_embed.weight\n    model.extra.weight\n    z.unexpected");
}

TEST(Checkpoint, ManyUnexpectedKeysAreCapped) {
    auto ts = schema_tensors();
    for (int i = 0; i < 30; i++) {
        ts.push_back({ "extra." + std::to_string(100 + i), { 1 } });
    }
    const std::string msg = open_error(make_checkpoint("unexpected", ts, read_file(RFDETR_COCO_CONFIG_JSON)));
    EXPECT_HAS(msg, "(487-tensor schema: 0 missing, 30 unexpected)");
    EXPECT_HAS(msg, "extra.119\n    ... and 10 more");
    EXPECT_EQ(msg.find("extra.120"), std::string::npos);
    EXPECT_EQ(msg.find("missing ("), std::string::npos);
}

TEST(Checkpoint, WrapperPrefixIsPointedOut) {
    auto ts = schema_tensors();
    for (auto & t : ts) {
        t.name = "module." + t.name;
    }
    const std::string msg = open_error(make_checkpoint("prefix", ts, read_file(RFDETR_COCO_CONFIG_JSON)));
    EXPECT_HAS(msg, "RF-DETR-base (487-tensor schema: 487 missing, 487 unexpected)");
    EXPECT_HAS(msg, "487 unexpected keys are schema keys under the prefix 'module.'");
}

TEST(Checkpoint, MisshapenTensorIsNamed) {
    auto ts = schema_tensors();
    for (auto & t : ts) {
        if (t.name == "transformer.decoder.layers.1.linear1.weight") {
            t.shape = { 2048, 255 };
        }
    }
    const std::string msg = open_error(make_checkpoint("shape", ts, read_file(RFDETR_COCO_CONFIG_JSON)));
    EXPECT_HAS(msg, "/shape/model.safetensors: 1 tensor do not have the RF-DETR-base shape");
    EXPECT_HAS(msg, "transformer.decoder.layers.1.linear1.weight has shape [2048, 255], expected [2048, 256]");
}

TEST(Checkpoint, ClassDependentTensorsMustAgree) {
    auto ts = schema_tensors();
    for (auto & t : ts) {
        if (t.name == "transformer.enc_out_class_embed.3.bias") {
            t.shape = { 90 };
        }
    }
    const std::string msg = open_error(make_checkpoint("classes", ts, read_file(RFDETR_COCO_CONFIG_JSON)));
    EXPECT_HAS(msg, "transformer.enc_out_class_embed.3.bias has 90 classes (axis 0) but class_embed.weight has 91 rows");
}

TEST(Checkpoint, OtherClassCountsLoadWithMatchingId2label) {
    for (int n : { 1, 7, 91, 365 }) {
        SCOPED_TRACE(n);
        const std::string dir = make_checkpoint("n" + std::to_string(n), schema_tensors(n), labels_config(n));
        auto              ck  = rfdetr::checkpoint::open(dir);
        EXPECT_EQ(ck->num_classes(), n);
        ASSERT_EQ(ck->labels().size(), static_cast<size_t>(n));
        EXPECT_EQ(ck->labels()[n - 1], "thing_" + std::to_string(n - 1));
        EXPECT_EQ(ck->get("class_embed.bias").shape, (std::vector<int64_t>{ n }));
        EXPECT_EQ(ck->get("transformer.enc_out_class_embed.12.weight").shape, (std::vector<int64_t>{ n, 256 }));
    }
}

TEST(Checkpoint, Id2labelCountMismatchNamesBothNumbers) {
    // 7-class checkpoint with the COCO (91-entry) config, num_labels removed so id2label is what disagrees.
    const std::string dir = make_checkpoint("mismatch", schema_tensors(7),
                                            coco_config([](nlohmann::ordered_json & j) { j.erase("num_labels"); }));
    const std::string msg = open_error(dir);
    EXPECT_HAS(msg, dir + "/config.json: id2label has 91 entries but the checkpoint has 7 classes");
}

TEST(Checkpoint, Id2labelKeysMustBeClassIndices) {
    const auto bad_key = [](const std::string & key) {
        return coco_config([key](nlohmann::ordered_json & j) {
            j["id2label"].erase("5");
            j["id2label"][key] = "x";
        });
    };
    EXPECT_HAS(open_error(make_checkpoint("key-range", schema_tensors(), bad_key("91"))),
               "id2label key \"91\" is outside the checkpoint's classes 0..90");
    EXPECT_HAS(open_error(make_checkpoint("key-text", schema_tensors(), bad_key("cat"))),
               "id2label key \"cat\" is not a class index");
    const std::string cfg = coco_config([](nlohmann::ordered_json & j) { j["id2label"]["5"] = 5; });
    EXPECT_HAS(open_error(make_checkpoint("label-type", schema_tensors(), cfg)), "id2label[\"5\"] is 5, expected a string");
    // Sparse id2label for a fine-tune: absent indices read "N/A".
    const std::string sparse = coco_config([](nlohmann::ordered_json & j) {
        j["id2label"] = { { "0", "cat" }, { "2", "dog" } };
        j.erase("num_labels");
    });
    EXPECT_HAS(open_error(make_checkpoint("sparse", schema_tensors(3), sparse)), "id2label has 2 entries but the checkpoint has 3 classes");
}

TEST(Checkpoint, ContradictingConfigFieldsAreNamed) {
    struct field_case {
        std::string path;
        nlohmann::ordered_json value;
        std::string fragment;
    };
    const std::vector<field_case> cases = {
        { "d_model", 512, "field d_model is 512 but the checkpoint's shapes say 256 (class_embed.weight [91, 256])" },
        { "num_labels", 80, "field num_labels is 80 but the checkpoint's shapes say 91 (class_embed.weight [91, 256] (rows = classes))" },
        { "decoder_ffn_dim", 1024, "field decoder_ffn_dim is 1024 but the checkpoint's shapes say 2048 (transformer.decoder.layers.0.linear1.weight [2048, 256])" },
        { "decoder_layers", 6, "field decoder_layers is 6 but the checkpoint's shapes say 3" },
        { "backbone_config.hidden_size", 768, "field backbone_config.hidden_size is 768 but the checkpoint's shapes say 384 (backbone.0.encoder.encoder.embeddings.cls_token [1, 1, 384])" },
        { "backbone_config.patch_size", 16, "field backbone_config.patch_size is 16" },
        { "backbone_config.num_hidden_layers", 24, "field backbone_config.num_hidden_layers is 24 but the checkpoint's shapes say 12" },
        { "d_model", "256", "field d_model is \"256\"" },
        { "group_detr", 1, "fields num_queries x group_detr are 300 x 1 but the checkpoint's shapes say 3900 (refpoint_embed.weight [3900, 4] rows)" },
        { "decoder_n_points", 4, "fields decoder_cross_attention_heads x num_feature_levels x decoder_n_points are 16 x 1 x 4 but the checkpoint's shapes say 32" },
    };
    for (const auto & c : cases) {
        SCOPED_TRACE(c.path);
        const std::string cfg = coco_config([&c](nlohmann::ordered_json & j) {
            const size_t dot = c.path.find('.');
            if (dot == std::string::npos) {
                j[c.path] = c.value;
            } else {
                j[c.path.substr(0, dot)][c.path.substr(dot + 1)] = c.value;
            }
        });
        const std::string dir = make_checkpoint("field", schema_tensors(), cfg);
        const std::string msg = open_error(dir);
        EXPECT_HAS(msg, dir + "/config.json: ");
        EXPECT_HAS(msg, c.fragment);
    }
    // Absent or null informational fields are fine; only id2label is required.
    const std::string minimal = coco_config([](nlohmann::ordered_json & j) {
        nlohmann::ordered_json keep = { { "id2label", j["id2label"] }, { "d_model", nullptr } };
        j = keep;
    });
    EXPECT_EQ(open_error(make_checkpoint("minimal", schema_tensors(), minimal)), "");
}

TEST(Checkpoint, MissingFilesAreNamed) {
    const std::string no_cfg = make_checkpoint("no-config", schema_tensors(), "");
    std::string       msg    = open_error(no_cfg);
    EXPECT_HAS(msg, no_cfg + "/config.json: cannot open");
    EXPECT_HAS(msg, "needs config.json (with id2label");

    const std::string no_id2label =
        make_checkpoint("no-id2label", schema_tensors(), coco_config([](nlohmann::ordered_json & j) { j.erase("id2label"); }));
    msg = open_error(no_id2label);
    EXPECT_HAS(msg, no_id2label + "/config.json: has no id2label");
    EXPECT_HAS(msg, "one entry per class (91 for this checkpoint)");

    const std::string bad_json = make_checkpoint("bad-config", schema_tensors(), "{\"id2label\": ");
    EXPECT_HAS(open_error(bad_json), bad_json + "/config.json: not valid JSON");

    const std::string cfg_dir = make_checkpoint("config-is-dir", schema_tensors(), "");
    (void) !std::system(("mkdir '" + cfg_dir + "/config.json'").c_str());
    EXPECT_HAS(open_error(cfg_dir), cfg_dir + "/config.json: not a regular file");

    const std::string empty = fresh_dir("empty-dir");
    msg = open_error(empty);
    EXPECT_HAS(msg, empty + "/model.safetensors: cannot open (No such file or directory)");
    EXPECT_HAS(msg, "rfdetr weights synth");

    EXPECT_HAS(open_error(empty + "/does-not-exist/"), empty + "/does-not-exist/model.safetensors: cannot open");

    write_file(empty + "/model.safetensors", "");
    EXPECT_HAS(open_error(empty), empty + "/model.safetensors: not a valid safetensors file: the file is 0 bytes");

    const std::string is_dir = fresh_dir("st-is-dir");
    (void) !std::system(("mkdir -p '" + is_dir + "/model.safetensors'").c_str());
    EXPECT_HAS(open_error(is_dir), is_dir + "/model.safetensors: not a regular file");
}

TEST(Checkpoint, TruncatedCheckpointFileIsNamed) {
    const std::string dir  = fresh_dir("truncated");
    uint64_t          data = 0;
    const std::string h    = make_header(schema_tensors(), &data);
    write_file(dir + "/config.json", read_file(RFDETR_COCO_CONFIG_JSON));
    for (int64_t size : { int64_t(5), int64_t(h.size() / 2), int64_t(h.size()), int64_t(h.size() + data / 2),
                          int64_t(h.size() + data - 4) }) {
        write_sparse(dir + "/model.safetensors", h, data, size);
        const std::string msg = open_error(dir);
        EXPECT_HAS(msg, dir + "/model.safetensors: not a valid safetensors file");
    }
}

// ---- the real seed-1 checkpoint written by the ctest fixture synth_seed1 ----

TEST(Seed1, LoadsWithValuesOfTheGenerator) {
    auto ck = rfdetr::checkpoint::open(RFDETR_SYNTH_SEED1_DIR);
    EXPECT_EQ(ck->num_classes(), 91);
    EXPECT_TRUE(ck->synthetic());
    EXPECT_EQ(ck->metadata().at("seed"), "0x1");
    EXPECT_EQ(ck->metadata().at("format"), "pt");
    EXPECT_EQ(ck->labels()[1], "person");
    // Every tensor: first and last 16 elements equal the generator's.
    for (const auto & st : rfdetr::schema_get().tensors) {
        const auto & t = ck->get(st.name);
        ASSERT_EQ(t.shape, st.shape) << st.name;
        const size_t       n = static_cast<size_t>(t.numel());
        const size_t       k = std::min<size_t>(16, n);
        std::vector<float> head(k);
        std::vector<float> tail(k);
        rfdetr::synth_fill(head.data(), 1, st.name, k, st.a, st.s);
        rfdetr::synth_fill(tail.data(), 1, st.name, k, st.a, st.s, n - k);
        for (size_t i = 0; i < k; i++) {
            ASSERT_EQ(t.data[i], head[i]) << st.name << "[" << i << "]";
            ASSERT_EQ(t.data[n - k + i], tail[i]) << st.name << "[" << n - k + i << "]";
        }
    }
}

TEST(Seed1, TensorsAreViewsOfTheMappedFileNotCopies) {
    // Opening maps model.safetensors and validates the header; every tensor's data must point into that
    // mapping (no copy of the 129 MB), at the header's offset. /proc/self/maps names the mapping.
    auto              ck   = rfdetr::checkpoint::open(RFDETR_SYNTH_SEED1_DIR);
    const std::string file = std::string(RFDETR_SYNTH_SEED1_DIR) + "/model.safetensors";
    char              real[PATH_MAX];
    ASSERT_NE(realpath(file.c_str(), real), nullptr) << file;
    uintptr_t lo = 0, hi = 0;
    std::ifstream maps("/proc/self/maps");
    for (std::string line; std::getline(maps, line);) {
        if (line.size() < std::strlen(real) || line.compare(line.size() - std::strlen(real), std::string::npos, real) != 0) continue;
        unsigned long a = 0, b = 0;
        ASSERT_EQ(std::sscanf(line.c_str(), "%lx-%lx", &a, &b), 2) << line;
        lo = lo ? std::min<uintptr_t>(lo, a) : a;
        hi = std::max<uintptr_t>(hi, b);
    }
    ASSERT_NE(lo, 0u) << file << " is not mapped into the process";
    int checked = 0;
    for (const auto & st : rfdetr::schema_get().tensors) {
        const auto p = reinterpret_cast<uintptr_t>(ck->get(st.name).data);
        ASSERT_GE(p, lo) << st.name << " lies outside the mapping of " << file;
        ASSERT_LE(p + static_cast<uintptr_t>(st.numel_for(91)) * 4, hi) << st.name << " lies outside the mapping of " << file;
        ++checked;
    }
    EXPECT_EQ(checked, 487);
}
