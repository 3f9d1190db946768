#include "model/schema.h"

#include <nlohmann/json.hpp>

#include <algorithm>

#include "common/error.h"

namespace rfdetr {

struct embedded_text {
    const char * file;
    const char * text;
};
extern const embedded_text k_embedded_schemas[];
extern const size_t        k_embedded_schema_count;
extern const char * const  k_embedded_coco_config;
extern const char * const  k_embedded_transformers_keys;

std::vector<int64_t> schema_tensor::shape_for(int64_t num_classes) const {
    std::vector<int64_t> out = shape;
    if (class_axis >= 0) {
        out[class_axis] = num_classes;
    }
    return out;
}

int64_t schema_tensor::numel_for(int64_t num_classes) const {
    int64_t n = 1;
    for (int64_t d : shape_for(num_classes)) {
        n *= d;
    }
    return n;
}

bool model_arch::is_global(int block) const {
    return std::find(out_feature_indexes.begin(), out_feature_indexes.end(), block) != out_feature_indexes.end();
}

int model_arch::blocks_used() const {
    return *std::max_element(out_feature_indexes.begin(), out_feature_indexes.end());
}

int model_arch::tap_of_block(int block) const {
    for (size_t i = 0; i < out_feature_indexes.size(); i++) {
        if (out_feature_indexes[i] - 1 == block) {
            return static_cast<int>(i);
        }
    }
    return -1;
}

std::string shape_str(const std::vector<int64_t> & shape) {
    std::string s = "[";
    for (size_t i = 0; i < shape.size(); i++) {
        s += (i ? ", " : "") + std::to_string(shape[i]);
    }
    return s + "]";
}

namespace {

// The embedded schemas are build input, so a malformed one is a build defect: fail loudly at first use.
schema parse_schema(const embedded_text & e) {
    const std::string where = std::string("the embedded sidecar/schema/") + e.file;
    nlohmann::json    j     = nlohmann::json::parse(e.text, nullptr, /*allow_exceptions=*/false);
    if (j.is_discarded() || !j.contains("tensors") || !j.contains("architecture") || !j.contains("variant")) {
        throw error("schema: " + where + " is not valid JSON with variant, architecture and tensors; rebuild from a clean checkout");
    }
    schema s;
    try {
        s.variant      = j.at("variant").get<std::string>();
        s.model        = j.at("model").get<std::string>();
        s.config_class = j.at("config_class").get<std::string>();
        s.file         = e.file;
        s.num_classes  = j.value("num_classes", 91);
        s.config_json  = j.value("config", nlohmann::json::object()).dump();
        const auto & a = j.at("architecture");
        model_arch & m = s.arch;
        m.encoder             = a.at("encoder").get<std::string>();
        m.out_feature_indexes = a.at("out_feature_indexes").get<std::vector<int>>();
        m.projector_scale     = a.at("projector_scale").get<std::vector<std::string>>();
        const std::pair<const char *, int model_arch::*> ints[] = {
            { "resolution", &model_arch::resolution }, { "patch_size", &model_arch::patch_size },
            { "num_windows", &model_arch::num_windows }, { "pos_grid", &model_arch::pos_grid },
            { "vit_layers", &model_arch::vit_layers }, { "vit_hidden", &model_arch::vit_hidden },
            { "vit_heads", &model_arch::vit_heads }, { "vit_mlp", &model_arch::vit_mlp }, { "d_model", &model_arch::d_model },
            { "c2f_blocks", &model_arch::c2f_blocks }, { "dec_layers", &model_arch::dec_layers },
            { "sa_heads", &model_arch::sa_heads }, { "ca_heads", &model_arch::ca_heads },
            { "dec_points", &model_arch::dec_points }, { "ffn", &model_arch::ffn },
            { "num_queries", &model_arch::num_queries }, { "group_detr", &model_arch::group_detr },
        };
        for (const auto & [key, field] : ints) {
            m.*field = a.at(key).get<int>();
        }
        m.task = a.at("task").get<std::string>();
        if (m.segment()) {
            m.mask_downsample = a.at("mask_downsample").get<int>();
            m.mask_blocks     = a.at("mask_blocks").get<int>();
        }
        for (const auto & t : j.at("tensors")) {
            schema_tensor st;
            st.name       = t.at("name").get<std::string>();
            st.shape      = t.at("shape").get<std::vector<int64_t>>();
            st.rule       = t.at("rule").get<std::string>();
            st.a          = t.at("A").get<double>();
            st.s          = t.at("S").get<double>();
            st.class_axis = t.value("class_axis", -1);
            s.tensors.push_back(std::move(st));
        }
    } catch (const nlohmann::json::exception & ex) {
        throw error("schema: " + where + ": " + ex.what() + "; rebuild from a clean checkout");
    }
    for (size_t i = 0; i < s.tensors.size(); i++) {
        s.index[s.tensors[i].name] = i;
    }
    const model_arch & m = s.arch;
    if (s.index.size() != s.tensors.size() || (j.contains("count") && j["count"] != s.tensors.size()) ||
        m.patch_size <= 0 || m.num_windows <= 0 || m.resolution % (m.patch_size * m.num_windows) != 0 ||
        m.out_feature_indexes.empty() || m.levels() < 1 || (m.task != "detect" && !m.segment()) ||
        (m.segment() && (m.mask_downsample <= 0 || m.resolution % m.mask_downsample != 0 || m.mask_blocks < 1))) {
        throw error("schema: " + where + " has duplicate names, a wrong 'count' or an inconsistent architecture");
    }
    return s;
}

std::vector<schema> parse_all() {
    std::vector<schema> out;
    for (size_t i = 0; i < k_embedded_schema_count; i++) {
        out.push_back(parse_schema(k_embedded_schemas[i]));
    }
    // Base first (the default), then by model size as the family lists them, detection before Seg.
    const std::vector<std::string> order = { "base",     "nano",      "small",      "medium",    "large",      "large_deprecated",
                                             "seg-nano", "seg-small", "seg-medium", "seg-large", "seg-xlarge", "seg-2xlarge" };
    const auto rank = [&](const schema & s) {
        auto it = std::find(order.begin(), order.end(), s.variant);
        return it == order.end() ? order.size() : static_cast<size_t>(it - order.begin());
    };
    std::stable_sort(out.begin(), out.end(), [&](const schema & a, const schema & b) { return rank(a) < rank(b); });
    if (out.empty() || out[0].variant != "base") {
        throw error("schema: no embedded rfdetr-base.json; rebuild from a clean checkout");
    }
    return out;
}

key_map parse_key_map() {
    key_map m;
    try {
        const nlohmann::json j = nlohmann::json::parse(k_embedded_transformers_keys);
        m.marker               = j.at("marker").get<std::string>();
        for (const auto & r : j.at("rules")) {
            key_rule k;
            k.native   = r.at("native").get<std::string>();
            k.upstream = r.at("upstream").get<std::string>();
            if (r.contains("fuse")) {
                k.fuse_part  = r["fuse"].at("part").get<int>();
                k.fuse_order = r["fuse"].at("order").get<std::vector<std::string>>();
            }
            m.rules.push_back(std::move(k));
        }
    } catch (const nlohmann::json::exception & ex) {
        throw error(std::string("schema: the embedded sidecar/schema/transformers-keys.json: ") + ex.what() +
                    "; rebuild from a clean checkout");
    }
    return m;
}

}  // namespace

const schema_tensor * schema::find(const std::string & name) const {
    auto it = index.find(name);
    return it == index.end() ? nullptr : &tensors[it->second];
}

const std::vector<schema> & schemas_all() {
    static const std::vector<schema> all = parse_all();
    return all;
}

std::string schema_variant_names() {
    std::string s;
    for (const auto & sch : schemas_all()) {
        s += (s.empty() ? "" : ", ") + sch.variant;
    }
    return s;
}

const schema & schema_get(const std::string & variant) {
    for (const auto & s : schemas_all()) {
        if (s.variant == variant) {
            return s;
        }
    }
    throw error("unknown RF-DETR variant '" + variant + "'; supported: " + schema_variant_names());
}

const key_map & transformers_key_map() {
    static const key_map m = parse_key_map();
    return m;
}

const char * schema_json_text(const std::string & variant) {
    const std::string file = "rfdetr-" + (variant == "large_deprecated" ? std::string("large-deprecated") : variant) + ".json";
    for (size_t i = 0; i < k_embedded_schema_count; i++) {
        if (file == k_embedded_schemas[i].file) {
            return k_embedded_schemas[i].text;
        }
    }
    throw error("unknown RF-DETR variant '" + variant + "'; supported: " + schema_variant_names());
}

const char * coco_config_json_text() {
    return k_embedded_coco_config;
}

const char * transformers_keys_json_text() {
    return k_embedded_transformers_keys;
}

}  // namespace rfdetr
