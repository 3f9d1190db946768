// The family: every variant's embedded schema, the variant identified from shapes and key set, unsupported
// kinds refused by name, config.json naming another variant refused, transformers' native key names mapped
// (split q/k/v fused) with the values intact, and the generator against each variant's weights_check.
#include <gtest/gtest.h>

#include <cstring>
#include <functional>
#include <regex>
#include <tuple>

#include "common/error.h"
#include "golden-file.h"
#include "model/checkpoint.h"
#include "model/safetensors.h"
#include "model/schema.h"
#include "model/synth.h"
#include "skip.h"
#include "test-util.h"

using namespace rfdetr_test;

namespace {

const std::vector<std::string> k_variants = { "base",     "nano",      "small",      "medium",    "large",      "large_deprecated",
                                              "seg-nano", "seg-small", "seg-medium", "seg-large", "seg-xlarge", "seg-2xlarge" };

// The COCO config.json with the variant's own fields, as a synthetic checkpoint of it carries.
std::string variant_config(const std::string & variant) {
    return coco_config([&](nlohmann::ordered_json & j) {
        const auto patch = nlohmann::ordered_json::parse(rfdetr::schema_get(variant).config_json);
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
        merge(j, patch);
    });
}

// Upstream name -> transformers' native name (an independent spelling of transformers-keys.json's inverse).
std::string native_name(std::string n, bool qkv_proj) {
    static const std::vector<std::pair<std::regex, std::string>> rules = {
        { std::regex(R"(^backbone\.0\.encoder\.encoder\.)"), "backbone.backbone." },
        { std::regex(R"(^backbone\.0\.projector\.stages\.(\d+)\.0\.cv(\d)\.conv\.)"), "backbone.projector.scale_layers.$1.projector_layer.conv$2.conv." },
        { std::regex(R"(^backbone\.0\.projector\.stages\.(\d+)\.0\.cv(\d)\.bn\.)"), "backbone.projector.scale_layers.$1.projector_layer.conv$2.norm." },
        { std::regex(R"(^backbone\.0\.projector\.stages\.(\d+)\.0\.m\.(\d+)\.cv(\d)\.conv\.)"), "backbone.projector.scale_layers.$1.projector_layer.bottlenecks.$2.conv$3.conv." },
        { std::regex(R"(^backbone\.0\.projector\.stages\.(\d+)\.0\.m\.(\d+)\.cv(\d)\.bn\.)"), "backbone.projector.scale_layers.$1.projector_layer.bottlenecks.$2.conv$3.norm." },
        { std::regex(R"(^backbone\.0\.projector\.stages\.(\d+)\.1\.)"), "backbone.projector.scale_layers.$1.layer_norm." },
        { std::regex(R"(^backbone\.0\.projector\.stages_sampling\.(\d+)\.(\d+)\.(\d+)\.bn\.)"), "backbone.projector.scale_layers.$1.sampling_layers.$2.layers.$3.norm." },
        { std::regex(R"(^backbone\.0\.projector\.stages_sampling\.(\d+)\.(\d+)\.(\d+)\.)"), "backbone.projector.scale_layers.$1.sampling_layers.$2.layers.$3." },
        { std::regex(R"(^transformer\.decoder\.layers\.(\d+)\.norm1\.)"), "decoder.layers.$1.self_attn_layer_norm." },
        { std::regex(R"(^transformer\.decoder\.layers\.(\d+)\.norm2\.)"), "decoder.layers.$1.cross_attn_layer_norm." },
        { std::regex(R"(^transformer\.decoder\.layers\.(\d+)\.norm3\.)"), "decoder.layers.$1.layer_norm." },
        { std::regex(R"(^transformer\.decoder\.layers\.(\d+)\.linear(\d)\.)"), "decoder.layers.$1.mlp.fc$2." },
        { std::regex(R"(^transformer\.decoder\.layers\.(\d+)\.self_attn\.out_proj\.)"), "decoder.layers.$1.self_attn.o_proj." },
        { std::regex(R"(^transformer\.decoder\.norm\.)"), "decoder.layernorm." },
        { std::regex(R"(^transformer\.)"), "" },
        { std::regex(R"(^refpoint_embed\.)"), "reference_point_embed." },
    };
    for (const auto & [re, to] : rules) {
        n = std::regex_replace(n, re, to, std::regex_constants::format_first_only);
    }
    if (qkv_proj) {
        n = std::regex_replace(n, std::regex(R"(\.attention\.attention\.query\.)"), ".attention.q_proj.");
        n = std::regex_replace(n, std::regex(R"(\.attention\.attention\.key\.)"), ".attention.k_proj.");
        n = std::regex_replace(n, std::regex(R"(\.attention\.attention\.value\.)"), ".attention.v_proj.");
        n = std::regex_replace(n, std::regex(R"(\.attention\.output\.dense\.)"), ".attention.o_proj.");
        n = "model." + n;
    }
    return n;
}

// Writes the checkpoint `from` (an opened upstream-named one) under transformers' native names into DIR, with
// the decoder's in_proj split into q/k/v. `drop` names a native key to leave out.
std::string write_native(const rfdetr::checkpoint & from, const std::string & name, bool qkv_proj,
                         const std::string & drop = "") {
    struct out_tensor {
        fake_tensor   t;
        const float * data;
    };
    std::vector<out_tensor> outs;
    for (const auto & st : from.variant().tensors) {
        const auto & v = from.get(st.name);
        const std::smatch none;
        static const std::regex in_proj(R"(^(transformer\.decoder\.layers\.\d+\.self_attn)\.in_proj_(weight|bias)$)");
        std::smatch m;
        if (std::regex_match(st.name, m, in_proj)) {
            std::vector<int64_t> part = v.shape;
            part[0] /= 3;
            const int64_t n = numel(part);
            const char *  qkv[3] = { "q", "k", "v" };
            for (int i = 0; i < 3; i++) {
                const std::string base = native_name(m[1].str() + ".", qkv_proj);
                outs.push_back({ { base + qkv[i] + "_proj." + m[2].str(), part }, v.data + i * n });
            }
        } else {
            outs.push_back({ { native_name(st.name, qkv_proj), v.shape }, v.data });
        }
    }
    std::vector<fake_tensor> ts;
    std::vector<const float *> data;
    for (const auto & o : outs) {
        if (o.t.name != drop) {
            ts.push_back(o.t);
            data.push_back(o.data);
        }
    }
    const std::string dir = fresh_dir(name);
    const std::string h   = make_header(ts);
    std::ofstream     out(dir + "/model.safetensors", std::ios::binary);
    out.write(h.data(), static_cast<std::streamsize>(h.size()));
    for (size_t i = 0; i < ts.size(); i++) {
        out.write(reinterpret_cast<const char *>(data[i]), static_cast<std::streamsize>(numel(ts[i].shape) * 4));
    }
    out.close();
    write_file(dir + "/config.json", read_file(from.dir() + "/config.json"));
    return dir;
}

}  // namespace

TEST(Variants, EveryVariantIsEmbeddedFromTheTree) {
    const auto & all = rfdetr::schemas_all();
    ASSERT_EQ(all.size(), k_variants.size());
    const std::map<std::string, size_t> counts = { { "base", 487 }, { "nano", 465 }, { "small", 487 },
                                                   { "medium", 509 }, { "large", 509 }, { "large_deprecated", 533 },
                                                   { "seg-nano", 544 }, { "seg-small", 544 }, { "seg-medium", 572 },
                                                   { "seg-large", 572 }, { "seg-xlarge", 600 }, { "seg-2xlarge", 600 } };
    for (size_t i = 0; i < all.size(); i++) {
        SCOPED_TRACE(all[i].variant);
        EXPECT_EQ(all[i].variant, k_variants[i]);
        EXPECT_EQ(all[i].tensors.size(), counts.at(all[i].variant));
        EXPECT_EQ(std::string(rfdetr::schema_json_text(all[i].variant)),
                  read_file(std::string(RFDETR_SCHEMA_DIR) + "/" + all[i].file));
        EXPECT_EQ(all[i].arch.resolution % (all[i].arch.patch_size * all[i].arch.num_windows), 0);
    }
    EXPECT_EQ(std::string(rfdetr::transformers_keys_json_text()), read_file(std::string(RFDETR_SCHEMA_DIR) + "/transformers-keys.json"));
    const auto & nano = rfdetr::schema_get("nano").arch;
    EXPECT_EQ(nano.grid(), 24);
    EXPECT_EQ(nano.window_side(), 12);
    EXPECT_EQ(nano.blocks_used(), 12);
    EXPECT_TRUE(nano.is_global(3));
    EXPECT_FALSE(nano.is_global(11));
    EXPECT_EQ(nano.tap_of_block(11), 3);
    EXPECT_EQ(rfdetr::schema_get().arch.blocks_used(), 11);
    EXPECT_EQ(rfdetr::schema_get("large_deprecated").arch.levels(), 2);
    EXPECT_EQ(rfdetr::schema_get("large").arch.task, "detect");
    EXPECT_FALSE(rfdetr::schema_get("large").arch.segment());
    EXPECT_EQ(rfdetr::schema_get("large").arch.mask_side(), 0);
    // Seg: M = R/4 (spec: 312->78, 384->96, 432->108, 504->126; XL/2XL 624->156, 768->192), one head block per
    // decoder layer, patch 12.
    const std::vector<std::tuple<std::string, int, int, int, int, int>> seg = {
        { "seg-nano", 312, 78, 4, 100, 1 }, { "seg-small", 384, 96, 4, 100, 2 }, { "seg-medium", 432, 108, 5, 200, 2 },
        { "seg-large", 504, 126, 5, 200, 2 }, { "seg-xlarge", 624, 156, 6, 300, 2 }, { "seg-2xlarge", 768, 192, 6, 300, 2 },
    };
    for (const auto & [v, res, side, layers, queries, windows] : seg) {
        SCOPED_TRACE(v);
        const auto & a = rfdetr::schema_get(v).arch;
        EXPECT_EQ(a.task, "segment");
        EXPECT_TRUE(a.segment());
        EXPECT_EQ(a.resolution, res);
        EXPECT_EQ(a.patch_size, 12);
        EXPECT_EQ(a.grid(), res / 12);
        EXPECT_EQ(a.pos_grid, res / 12);
        EXPECT_EQ(a.mask_downsample, 4);
        EXPECT_EQ(a.mask_side(), side);
        EXPECT_EQ(a.dec_layers, layers);
        EXPECT_EQ(a.mask_blocks, layers);
        EXPECT_EQ(a.num_queries, queries);
        EXPECT_EQ(a.num_windows, windows);
        EXPECT_NE(rfdetr::schema_get(v).find("segmentation_head.blocks." + std::to_string(layers - 1) + ".dwconv.weight"), nullptr);
        EXPECT_EQ(rfdetr::schema_get(v).find("segmentation_head.blocks." + std::to_string(layers) + ".dwconv.weight"), nullptr);
    }
    try {
        rfdetr::schema_get("xlarge");
        ADD_FAILURE() << "no error";
    } catch (const rfdetr::error & e) {
        EXPECT_HAS(std::string(e.what()), "unknown RF-DETR variant 'xlarge'; supported: base, nano, small, medium, large, large_deprecated, "
                                             "seg-nano, seg-small, seg-medium, seg-large, seg-xlarge, seg-2xlarge");
    }
}

TEST(Variants, EachIsIdentifiedFromItsShapesWithAnyClassCount) {
    for (const auto & v : k_variants) {
        for (int n : { 91, 7 }) {
            SCOPED_TRACE(v + " " + std::to_string(n));
            std::string cfg = variant_config(v);
            if (n != 91) {
                auto j = nlohmann::ordered_json::parse(cfg);
                j["id2label"] = nlohmann::ordered_json::object();
                for (int i = 0; i < n; i++) j["id2label"][std::to_string(i)] = "c" + std::to_string(i);
                j["num_labels"] = n;
                cfg = j.dump();
            }
            const std::string dir = make_checkpoint("id-" + v + std::to_string(n), schema_tensors(n, v), cfg);
            std::unique_ptr<rfdetr::checkpoint> ck;
            ASSERT_NO_THROW(ck = rfdetr::checkpoint::open(dir)) << open_error(dir);
            EXPECT_EQ(ck->variant().variant, v);
            EXPECT_EQ(ck->layout(), "upstream");
            EXPECT_EQ(ck->num_classes(), n);
        }
    }
}

TEST(Variants, ShapesDecideBetweenVariantsWithTheSameKeys) {
    // Base and Small have the same 487 keys: a Small patch kernel on Base's other shapes is neither.
    auto ts = schema_tensors(91, "base");
    for (auto & t : ts) {
        if (t.name == "backbone.0.encoder.encoder.embeddings.patch_embeddings.projection.weight") t.shape = { 384, 3, 16, 16 };
    }
    const std::string msg = open_error(make_checkpoint("mixed", ts, variant_config("base")));
    EXPECT_HAS(msg, "1 tensor do not have the RF-DETR-base shape");
    EXPECT_HAS(msg, "patch_embeddings.projection.weight has shape [384, 3, 16, 16], expected [384, 3, 14, 14]");
    EXPECT_HAS(msg, "Supported: ");
}

TEST(Variants, UnsupportedKindsAreRefusedByName) {
    struct kind_case {
        std::string                               name;
        std::function<void(std::vector<fake_tensor> &)> edit;
        std::string                               fragment;
    };
    const std::vector<kind_case> cases = {
        { "kp", [](auto & ts) { ts.push_back({ "transformer.keypoint_embed.weight", { 17, 256 } }); }, "an RF-DETR keypoint checkpoint" },
        { "patch12", [](auto & ts) { for (auto & t : ts) if (t.name.find("projection.weight") != std::string::npos) t.shape = { 384, 3, 12, 12 }; },
          "a patch-12 DINOv2 backbone without segmentation_head.* tensors: only RF-DETR Seg models use patch 12" },
        { "vitb", [](auto & ts) { for (auto & t : ts) if (t.name.find("cls_token") != std::string::npos) t.shape = { 1, 1, 768 }; },
          "as RF-DETR XLarge/2XLarge (rfdetr_plus) use" },
        { "vitl", [](auto & ts) { for (auto & t : ts) if (t.name.find("cls_token") != std::string::npos) t.shape = { 1, 1, 1024 }; },
          "a 1024-wide ViT backbone" },
        { "resnet", [](auto & ts) {
              ts.erase(std::remove_if(ts.begin(), ts.end(), [](const fake_tensor & t) { return t.name.rfind("backbone.0.encoder.", 0) == 0; }), ts.end());
              ts.push_back({ "backbone.0.body.conv1.weight", { 64, 3, 7, 7 } });
          },
          "a DETR checkpoint with another backbone" },
    };
    for (const auto & c : cases) {
        SCOPED_TRACE(c.name);
        auto ts = schema_tensors(91, "nano");
        c.edit(ts);
        const std::string msg = open_error(make_checkpoint("kind-" + c.name, ts, variant_config("nano")));
        EXPECT_HAS(msg, c.fragment);
        EXPECT_HAS(msg, "Supported: RF-DETR detection and segmentation (Seg) checkpoints of the variants base (RF-DETR-base), "
                        "nano (RF-DETR-Nano), small (RF-DETR-Small), medium (RF-DETR-Medium), large (RF-DETR-Large), "
                        "large_deprecated (RF-DETR-LargeDeprecated), seg-nano (RF-DETR-Seg-Nano), ");
        EXPECT_HAS(msg, "seg-2xlarge (RF-DETR-Seg-2XLarge), with upstream rfdetr key names (or, for detection, "
                        "transformers' RfDetrForObjectDetection names)");
    }
}

TEST(Variants, ConfigNamingAnotherVariantIsRefused) {
    // Nano tensors with Base's config.json: decoder_layers contradicts the shapes; without it and the patch
    // size (both shape-checked), image_size 560 is named against Nano's 384.
    std::string msg = open_error(make_checkpoint("cfg-other", schema_tensors(91, "nano"), read_file(RFDETR_COCO_CONFIG_JSON)));
    EXPECT_HAS(msg, "field decoder_layers is 3 but the checkpoint's shapes say 2");
    const std::string dir = make_checkpoint("cfg-size", schema_tensors(91, "nano"), coco_config([](nlohmann::ordered_json & j) {
        j.erase("decoder_layers");
        j["backbone_config"].erase("patch_size");
    }));
    msg = open_error(dir);
    EXPECT_HAS(msg, dir + "/config.json: field image_size is 560 but the checkpoint's tensors are RF-DETR-Nano (RFDETRNanoConfig), whose image_size is 384");
    const std::string cls = coco_config([](nlohmann::ordered_json & j) { j["rfdetr"] = { { "config_class", "RFDETRSmallConfig" } }; });
    EXPECT_HAS(open_error(make_checkpoint("cfg-class", schema_tensors(91, "base"), cls)),
               "field rfdetr.config_class is \"RFDETRSmallConfig\" but the checkpoint's tensors are RF-DETR-base (RFDETRBaseConfig), whose rfdetr.config_class is \"RFDETRBaseConfig\"");
}

TEST(Variants, TransformersKeyNamesLoadWithTheSameValues) {
    const std::string src = fresh_dir("native-src") + "/ck";
    rfdetr::synth_options o;
    o.variant = "nano";
    rfdetr::synth_write(src, o);
    auto up = rfdetr::checkpoint::open(src);
    for (bool qkv_proj : { false, true }) {
        SCOPED_TRACE(qkv_proj);
        const std::string dir = write_native(*up, qkv_proj ? "native-qkv" : "native", qkv_proj);
        std::unique_ptr<rfdetr::checkpoint> ck;
        ASSERT_NO_THROW(ck = rfdetr::checkpoint::open(dir)) << open_error(dir);
        EXPECT_EQ(ck->layout(), "transformers");
        EXPECT_EQ(ck->variant().variant, "nano");
        for (const auto & st : ck->variant().tensors) {
            const auto & a = up->get(st.name);
            const auto & b = ck->get(st.name);
            ASSERT_EQ(a.shape, b.shape) << st.name;
            ASSERT_EQ(std::memcmp(a.data, b.data, static_cast<size_t>(a.numel()) * 4), 0) << st.name;
        }
    }
    const std::string msg = open_error(write_native(*up, "native-drop", false, "decoder.layers.1.self_attn.k_proj.weight"));
    EXPECT_HAS(msg, "transformer.decoder.layers.1.self_attn.in_proj_weight is made of the split q/k/v tensors, but its k part is missing");
    // An unknown native key is named with the layout it was read as.
    {
        auto ts = std::vector<fake_tensor>{};
        for (const auto & st : rfdetr::schema_get("nano").tensors) ts.push_back({ native_name(st.name, false), st.shape });
        ts.push_back({ "decoder.layers.0.self_attn.rotary.weight", { 4 } });
        const std::string m2 = open_error(make_checkpoint("native-unknown", ts, variant_config("nano")));
        EXPECT_HAS(m2, "transformers (RfDetrForObjectDetection) key names, but ");
        EXPECT_HAS(m2, " match no rule of its RF-DETR detection layout:");
        EXPECT_HAS(m2, "decoder.layers.0.self_attn.rotary.weight");
    }
}

TEST(Variants, GeneratorMatchesEachWeightsCheck) {
    const std::string fam = rfdetr::test::family_fixtures_dir();
    if (fam.empty()) {
        RFDETR_SKIP_OR_FAIL("no ../shared/fixtures/rfdetr-family (set RFDETR_FAMILY_FIXTURES)");
    }
    for (const auto & v : k_variants) {
        if (v == "base" || v.rfind("seg-", 0) == 0) continue;  // Seg: SegVariants.GeneratorMatchesEachSegWeightsCheck
        SCOPED_TRACE(v);
        const auto   check = nlohmann::json::parse(read_file(fam + "/" + v + "/weights_check_seed0x1.json"));
        const auto & sch   = rfdetr::schema_get(v);
        ASSERT_EQ(check.at("count").get<size_t>(), sch.tensors.size());
        for (const auto & st : sch.tensors) {
            const auto & want = check.at("tensors").at(st.name);
            ASSERT_EQ(want.at("shape").get<std::vector<int64_t>>(), st.shape) << st.name;
            float got[4];
            rfdetr::synth_fill(got, 1, st.name, 4, st.a, st.s);
            for (int i = 0; i < 4; i++) {
                uint32_t u;
                std::memcpy(&u, &got[i], 4);
                char hex[9];
                std::snprintf(hex, sizeof hex, "%08x", u);
                ASSERT_EQ(std::string(hex), want.at("first4_f32_hex")[i].get<std::string>()) << st.name << " [" << i << "]";
            }
        }
    }
}

namespace {

const std::vector<std::string> k_seg_fixture_sizes = { "nano", "small", "medium", "large" };

std::string seg_fixtures() {
    return rfdetr::test::seg_fixtures_dir();
}

}  // namespace

TEST(SegVariants, TheFixturesConfigJsonLoadsWithItsVariant) {
    const std::string seg = seg_fixtures();
    if (seg.empty()) {
        RFDETR_SKIP_OR_FAIL("no ../shared/fixtures/rfdetr-seg (set RFDETR_SEG_FIXTURES)");
    }
    for (const auto & size : k_seg_fixture_sizes) {
        SCOPED_TRACE(size);
        const std::string dir = make_checkpoint("seg-fixture-" + size, schema_tensors(91, "seg-" + size),
                                                read_file(seg + "/" + size + "/config.json"));
        std::unique_ptr<rfdetr::checkpoint> ck;
        ASSERT_NO_THROW(ck = rfdetr::checkpoint::open(dir)) << open_error(dir);
        EXPECT_EQ(ck->variant().variant, "seg-" + size);
        EXPECT_EQ(ck->labels().at(1), "person");
    }
}

TEST(SegVariants, ConfigContradictingTheHeadIsRefusedByName) {
    const auto seg_cfg = [](std::function<void(nlohmann::ordered_json &)> edit) {
        auto j = nlohmann::ordered_json::parse(variant_config("seg-small"));
        edit(j);
        return j.dump();
    };
    const auto ts = schema_tensors(91, "seg-small");
    EXPECT_HAS(open_error(make_checkpoint("seg-arch", ts, seg_cfg([](auto & j) { j["architectures"] = { "RfDetrForObjectDetection" }; }))),
               "field architectures names RfDetrForObjectDetection but the checkpoint's tensors are RF-DETR-Seg-Small (with a segmentation head)");
    EXPECT_HAS(open_error(make_checkpoint("seg-ratio", ts, seg_cfg([](auto & j) { j["mask_downsample_ratio"] = 8; }))),
               "field mask_downsample_ratio is 8 but the checkpoint's tensors are RF-DETR-Seg-Small (RFDETRSegSmallConfig), whose mask_downsample_ratio is 4");
    EXPECT_HAS(open_error(make_checkpoint("seg-inter", ts, seg_cfg([](auto & j) { j["intermediate_size"] = 2048; }))),
               "field intermediate_size is 2048 but the checkpoint's tensors are RF-DETR-Seg-Small (RFDETRSegSmallConfig), whose intermediate_size is 1024");
    EXPECT_HAS(open_error(make_checkpoint("seg-flag", ts, seg_cfg([](auto & j) { j["rfdetr"]["segmentation_head"] = false; }))),
               "field rfdetr.segmentation_head is false but the checkpoint's tensors are RF-DETR-Seg-Small");
    // Seg's config.json on Small's detection tensors: the class name says instance segmentation.
    auto det = nlohmann::ordered_json::parse(variant_config("small"));
    det["architectures"] = { "RfDetrForInstanceSegmentation" };
    EXPECT_HAS(open_error(make_checkpoint("det-arch", schema_tensors(91, "small"), det.dump())),
               "field architectures names RfDetrForInstanceSegmentation but the checkpoint's tensors are RF-DETR-Small (no segmentation head)");
}

TEST(SegVariants, HeadTensorsAreCheckedStrictly) {
    // A detection checkpoint with one head tensor is neither Nano nor a Seg size (Seg-Nano is closer by one name).
    auto ts = schema_tensors(91, "nano");
    ts.push_back({ "segmentation_head.bias", { 1 } });
    std::string msg = open_error(make_checkpoint("seg-extra", ts, variant_config("nano")));
    EXPECT_HAS(msg, "the tensor names match no variant's schema; the closest is RF-DETR-Seg-Nano (544-tensor schema: 78 missing, 0 unexpected)");
    // A Seg checkpoint missing one head tensor, or with one misshapen, is named against its size.
    ts = schema_tensors(91, "seg-medium");
    ts.erase(std::remove_if(ts.begin(), ts.end(), [](const fake_tensor & t) { return t.name == "segmentation_head.blocks.4.norm.bias"; }), ts.end());
    msg = open_error(make_checkpoint("seg-missing", ts, variant_config("seg-medium")));
    EXPECT_HAS(msg, "the closest is RF-DETR-Seg-Medium");
    EXPECT_HAS(msg, "missing (1):\n    segmentation_head.blocks.4.norm.bias");
    ts = schema_tensors(91, "seg-medium");
    for (auto & t : ts) if (t.name == "segmentation_head.blocks.0.dwconv.weight") t.shape = { 256, 1, 5, 5 };
    msg = open_error(make_checkpoint("seg-shape", ts, variant_config("seg-medium")));
    EXPECT_HAS(msg, "1 tensor do not have the RF-DETR-Seg-Medium shape");
    EXPECT_HAS(msg, "segmentation_head.blocks.0.dwconv.weight has shape [256, 1, 5, 5], expected [256, 1, 3, 3]");
    // Seg-Small's tensors with Medium's query count are neither (the query tables are [13*Q, .]).
    ts = schema_tensors(91, "seg-small");
    for (auto & t : ts) if (t.name == "query_feat.weight") t.shape = { 2600, 256 };
    EXPECT_HAS(open_error(make_checkpoint("seg-queries", ts, variant_config("seg-small"))),
               "query_feat.weight has shape [2600, 256], expected [1300, 256]");
}

TEST(SegVariants, TransformersNamedSegCheckpointsAreRefusedByName) {
    std::vector<fake_tensor> ts;
    for (const auto & st : rfdetr::schema_get("seg-nano").tensors) ts.push_back({ native_name(st.name, false), st.shape });
    const std::string msg = open_error(make_checkpoint("seg-native", ts, variant_config("seg-nano")));
    EXPECT_HAS(msg, "transformers key names with a segmentation head (segmentation_head.");
    EXPECT_HAS(msg, "RF-DETR Seg checkpoints are read only with upstream rfdetr key names");
}

TEST(SegVariants, GeneratorMatchesEachSegWeightsCheck) {
    const std::string seg = seg_fixtures();
    if (seg.empty()) {
        RFDETR_SKIP_OR_FAIL("no ../shared/fixtures/rfdetr-seg (set RFDETR_SEG_FIXTURES)");
    }
    for (const auto & size : k_seg_fixture_sizes) {
        SCOPED_TRACE(size);
        const auto   check = nlohmann::json::parse(read_file(seg + "/" + size + "/weights_check_seed0x1.json"));
        const auto & sch   = rfdetr::schema_get("seg-" + size);
        ASSERT_EQ(check.at("count").get<size_t>(), sch.tensors.size());
        for (const auto & st : sch.tensors) {
            const auto & want = check.at("tensors").at(st.name);
            ASSERT_EQ(want.at("shape").get<std::vector<int64_t>>(), st.shape) << st.name;
            // segmentation_head.bias has one element: compare what the check file lists (up to 4).
            const auto & first = want.at("first4_f32_hex");
            ASSERT_EQ(first.size(), static_cast<size_t>(std::min<int64_t>(4, st.numel_for(91)))) << st.name;
            float got[4];
            rfdetr::synth_fill(got, 1, st.name, first.size(), st.a, st.s);
            for (size_t i = 0; i < first.size(); i++) {
                uint32_t u;
                std::memcpy(&u, &got[i], 4);
                char hex[9];
                std::snprintf(hex, sizeof hex, "%08x", u);
                ASSERT_EQ(std::string(hex), first[i].get<std::string>()) << st.name << " [" << i << "]";
            }
        }
    }
}
