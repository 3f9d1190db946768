// config.json of a checkpoint directory: id2label is what the loader needs; the other (informational)
// fields are refused only when present AND contradicting the checkpoint's shapes or its variant.
#include <algorithm>
#include <cmath>
#include <sstream>
#include <nlohmann/json.hpp>

#include "common/error.h"
#include "model/checkpoint.h"
#include "model/safetensors.h"
#include "model/schema.h"

namespace rfdetr {

namespace {

std::vector<int64_t> schema_shape(const schema & sch, const std::string & name, int num_classes) {
    const schema_tensor * st = sch.find(name);
    if (!st) {
        throw error("config_parse: schema has no tensor '" + name + "'; the schema and config.cpp disagree");
    }
    return st->shape_for(num_classes);
}

std::string shape_ref(const schema & sch, const std::string & name, int num_classes) {
    return name + " " + shape_str(schema_shape(sch, name, num_classes));
}

std::string clip_dump(const nlohmann::json & v) {
    std::string s = v.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
    return s.size() <= 60 ? s : s.substr(0, 60) + "...";
}

// A dotted path ("backbone_config.hidden_size") into the config, or nullptr when absent (or null).
const nlohmann::json * lookup(const nlohmann::json & root, const std::string & path) {
    const nlohmann::json * cur = &root;
    size_t                 pos = 0;
    while (true) {
        const size_t      dot = path.find('.', pos);
        const std::string key = path.substr(pos, dot == std::string::npos ? std::string::npos : dot - pos);
        if (!cur->is_object()) {
            return nullptr;
        }
        auto it = cur->find(key);
        if (it == cur->end() || it->is_null()) {
            return nullptr;
        }
        cur = &*it;
        if (dot == std::string::npos) {
            return cur;
        }
        pos = dot + 1;
    }
}

struct field_check {
    std::string path;    // config field
    double      want;    // what the checkpoint's shapes imply
    std::string source;  // the shape it is derived from, for the message
};

}  // namespace

model_config config_parse(const std::string & file, const std::string & text, const schema & sch, int num_classes) {
    nlohmann::json j;
    try {
        j = nlohmann::json::parse(text);
    } catch (const nlohmann::json::exception & e) {
        throw error(file + ": not valid JSON (" + printable_clip(e.what(), 200) + "); expected the model's config.json with id2label");
    }
    if (!j.is_object()) {
        throw error(file + ": is a JSON " + std::string(j.type_name()) + ", expected an object with id2label");
    }

    model_config cfg;
    cfg.labels.assign(num_classes, "N/A");
    auto id2label = j.find("id2label");
    if (id2label == j.end() || !id2label->is_object()) {
        throw error(file + ": " + (id2label == j.end() ? "has no id2label" : "id2label is not an object") +
                    "; expected \"id2label\": {\"0\": \"<name of class 0>\", ...} with one entry per class (" +
                    std::to_string(num_classes) + " for this checkpoint)");
    }
    if (id2label->size() != static_cast<size_t>(num_classes)) {
        throw error(file + ": id2label has " + std::to_string(id2label->size()) + " entries but the checkpoint has " +
                    std::to_string(num_classes) + " classes (class_embed.weight rows); use the config.json that "
                    "belongs to this checkpoint");
    }
    for (auto it = id2label->begin(); it != id2label->end(); ++it) {
        const std::string & key   = it.key();
        bool                digits = !key.empty() && key.size() <= 9;
        for (char c : key) {
            digits &= c >= '0' && c <= '9';
        }
        if (!digits || (key.size() > 1 && key[0] == '0')) {
            throw error(file + ": id2label key " + clip_dump(nlohmann::json(key)) +
                        " is not a class index; expected decimal strings \"0\".." +
                        std::to_string(num_classes - 1));
        }
        const long idx = std::stol(key);
        if (idx >= num_classes) {
            throw error(file + ": id2label key \"" + key + "\" is outside the checkpoint's classes 0.." +
                        std::to_string(num_classes - 1) + " (class_embed.weight has " + std::to_string(num_classes) +
                        " rows)");
        }
        if (!it.value().is_string()) {
            throw error(file + ": id2label[\"" + key + "\"] is " + clip_dump(it.value()) + ", expected a string label");
        }
        cfg.labels[idx] = it.value().get<std::string>();
    }

    const std::vector<int64_t> cls   = schema_shape(sch, "class_embed.weight", num_classes);
    const std::vector<int64_t> cls_t = schema_shape(sch, "backbone.0.encoder.encoder.embeddings.cls_token", num_classes);
    const std::vector<int64_t> patch =
        schema_shape(sch, "backbone.0.encoder.encoder.embeddings.patch_embeddings.projection.weight", num_classes);
    const std::vector<int64_t> fc1 =
        schema_shape(sch, "backbone.0.encoder.encoder.encoder.layer.0.mlp.fc1.weight", num_classes);
    const std::vector<int64_t> lin1 = schema_shape(sch, "transformer.decoder.layers.0.linear1.weight", num_classes);
    const std::vector<int64_t> ref  = schema_shape(sch, "refpoint_embed.weight", num_classes);
    const std::vector<int64_t> m0   = schema_shape(sch, "backbone.0.projector.stages.0.0.m.0.cv1.conv.weight", num_classes);
    const std::vector<int64_t> cv1  = schema_shape(sch, "backbone.0.projector.stages.0.0.cv1.conv.weight", num_classes);
    const std::vector<int64_t> attw =
        schema_shape(sch, "transformer.decoder.layers.0.cross_attn.attention_weights.weight", num_classes);

    int vit_layers = 0;
    int dec_layers = 0;
    int c2f_blocks = 0;
    for (const auto & st : sch.tensors) {
        const auto count = [&](const std::string & prefix, int & n) {
            if (st.name.compare(0, prefix.size(), prefix) == 0) {
                n = std::max(n, std::stoi(st.name.substr(prefix.size())) + 1);
            }
        };
        count("backbone.0.encoder.encoder.encoder.layer.", vit_layers);
        count("transformer.decoder.layers.", dec_layers);
        count("backbone.0.projector.stages.0.0.m.", c2f_blocks);
    }

    const std::vector<field_check> checks = {
        { "num_labels", double(num_classes), shape_ref(sch, "class_embed.weight", num_classes) + " (rows = classes)" },
        { "d_model", double(cls[1]), shape_ref(sch, "class_embed.weight", num_classes) },
        { "decoder_ffn_dim", double(lin1[0]), shape_ref(sch, "transformer.decoder.layers.0.linear1.weight", num_classes) },
        { "decoder_layers", double(dec_layers),
          "the " + std::to_string(dec_layers) + " transformer.decoder.layers.N.* tensor groups" },
        { "c2f_num_blocks", double(c2f_blocks),
          "the " + std::to_string(c2f_blocks) + " backbone.0.projector.stages.0.0.m.N.* tensor groups" },
        { "hidden_expansion", double(m0[0]) / double(cv1[0]),
          shape_ref(sch, "backbone.0.projector.stages.0.0.m.0.cv1.conv.weight", num_classes) + " / " +
              shape_ref(sch, "backbone.0.projector.stages.0.0.cv1.conv.weight", num_classes) },
        { "backbone_config.hidden_size", double(cls_t[2]),
          shape_ref(sch, "backbone.0.encoder.encoder.embeddings.cls_token", num_classes) },
        { "backbone_config.num_hidden_layers", double(vit_layers),
          "the " + std::to_string(vit_layers) + " backbone.0.encoder.encoder.encoder.layer.N.* tensor groups" },
        { "backbone_config.patch_size", double(patch[2]),
          shape_ref(sch, "backbone.0.encoder.encoder.embeddings.patch_embeddings.projection.weight", num_classes) },
        { "backbone_config.num_channels", double(patch[1]),
          shape_ref(sch, "backbone.0.encoder.encoder.embeddings.patch_embeddings.projection.weight", num_classes) },
        { "backbone_config.mlp_ratio", double(fc1[0]) / double(fc1[1]),
          shape_ref(sch, "backbone.0.encoder.encoder.encoder.layer.0.mlp.fc1.weight", num_classes) },
    };
    for (const auto & c : checks) {
        const nlohmann::json * v = lookup(j, c.path);
        if (!v) {
            continue;
        }
        if (!v->is_number() || std::fabs(v->get<double>() - c.want) > 1e-9 * std::max(1.0, std::fabs(c.want))) {
            std::ostringstream want;
            want << c.want;
            throw error(file + ": field " + c.path + " is " + clip_dump(*v) + " but the checkpoint's shapes say " +
                        want.str() + " (" + c.source + "); the config.json does not belong to this checkpoint: fix or "
                        "remove the field");
        }
    }
    // Products of fields: queries x groups = refpoint_embed rows; cross-attn heads x levels x points = the
    // attention_weights rows. Checked only when every factor is present.
    const auto product_check = [&](const std::vector<std::string> & fields, int64_t want, const std::string & src) {
        double      prod = 1;
        std::string desc;
        std::string vals;
        for (const auto & f : fields) {
            const nlohmann::json * v = lookup(j, f);
            if (!v) {
                return;
            }
            if (!v->is_number()) {
                throw error(file + ": field " + f + " is " + clip_dump(*v) + ", expected a number (" + src + ")");
            }
            prod *= v->get<double>();
            desc += (desc.empty() ? "" : " x ") + f;
            vals += (vals.empty() ? "" : " x ") + clip_dump(*v);
        }
        if (std::fabs(prod - double(want)) > 1e-9 * double(want)) {
            throw error(file + ": fields " + desc + " are " + vals + " but the checkpoint's shapes say " +
                        std::to_string(want) + " (" + src + "); the config.json does not belong to this checkpoint: "
                        "fix or remove the fields");
        }
    };
    product_check({ "num_queries", "group_detr" }, ref[0], shape_ref(sch, "refpoint_embed.weight", num_classes) + " rows");
    product_check({ "decoder_cross_attention_heads", "num_feature_levels", "decoder_n_points" }, attw[0],
                  shape_ref(sch, "transformer.decoder.layers.0.cross_attn.attention_weights.weight", num_classes) + " rows");

    // Fields that name a variant: they must name the one the shapes say.
    const model_arch & a = sch.arch;
    const std::vector<std::pair<std::string, nlohmann::json>> variant_fields = {
        { "rfdetr.config_class", sch.config_class },
        { "rfdetr.encoder", a.encoder },
        { "rfdetr.resolution", a.resolution },
        { "rfdetr.patch_size", a.patch_size },
        { "rfdetr.num_windows", a.num_windows },
        { "rfdetr.positional_encoding_size", a.pos_grid },
        { "rfdetr.out_feature_indexes", a.out_feature_indexes },
        { "rfdetr.projector_scale", a.projector_scale },
        { "rfdetr.dec_layers", a.dec_layers },
        { "image_size", a.resolution },
        { "backbone_config.num_windows", a.num_windows },
        { "backbone_config.out_indices", a.out_feature_indexes },
        { "num_feature_levels", a.levels() },
    };
    std::vector<std::pair<std::string, nlohmann::json>> fields = variant_fields;
    if (a.segment()) {
        fields.push_back({ "rfdetr.segmentation_head", true });
        fields.push_back({ "rfdetr.mask_downsample_ratio", a.mask_downsample });
        fields.push_back({ "mask_downsample_ratio", a.mask_downsample });
        fields.push_back({ "intermediate_size",
                           schema_shape(sch, "segmentation_head.query_features_block.layers.0.weight", num_classes)[0] });
    } else {
        // Upstream's detection configs carry mask_downsample_ratio too (unused without a head), so only the
        // head's presence is checked.
        fields.push_back({ "rfdetr.segmentation_head", false });
    }
    // The transformers class names the task: a detection class on a Seg checkpoint (or the reverse) is a
    // config.json from another model.
    if (const nlohmann::json * arches = lookup(j, "architectures"); arches && arches->is_array()) {
        const char * other = a.segment() ? "RfDetrForObjectDetection" : "RfDetrForInstanceSegmentation";
        for (const auto & name : *arches) {
            if (name == other) {
                throw error(file + ": field architectures names " + other + " but the checkpoint's tensors are " +
                            sch.model + (a.segment() ? " (with a segmentation head)" : " (no segmentation head)") +
                            "; the config.json does not belong to this checkpoint: fix or remove the field");
            }
        }
    }
    for (const auto & [path, want] : fields) {
        const nlohmann::json * v = lookup(j, path);
        if (v && *v != want) {
            throw error(file + ": field " + path + " is " + clip_dump(*v) + " but the checkpoint's tensors are " +
                        sch.model + " (" + sch.config_class + "), whose " + path + " is " + clip_dump(want) +
                        "; the config.json does not belong to this checkpoint (or asks for a resolution or windowing "
                        "this server does not run): fix or remove the field");
        }
    }

    auto syn = j.find("synthetic");
    cfg.synthetic = syn != j.end() && syn->is_boolean() && syn->get<bool>();
    return cfg;
}

}  // namespace rfdetr
