#include "model/schema.h"

#include <nlohmann/json.hpp>

#include <unordered_map>

#include "engines/engine.h"

namespace rfdetr {

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

std::string shape_str(const std::vector<int64_t> & shape) {
    std::string s = "[";
    for (size_t i = 0; i < shape.size(); i++) {
        s += (i ? ", " : "") + std::to_string(shape[i]);
    }
    return s + "]";
}

namespace {

struct parsed_schema {
    schema                                                 sch;
    std::unordered_map<std::string, const schema_tensor *> index;
};

parsed_schema parse_schema() {
    parsed_schema p;
    // The embedded schema is build input, so a malformed one is a build defect: fail loudly at first use.
    nlohmann::json j = nlohmann::json::parse(schema_json_text(), nullptr, /*allow_exceptions=*/false);
    if (j.is_discarded() || !j.contains("tensors")) {
        throw error("schema_get: the embedded sidecar/schema/rfdetr-base.json is not valid JSON with 'tensors'; "
                    "rebuild from a clean checkout");
    }
    p.sch.model       = j.value("model", "RF-DETR-base");
    p.sch.num_classes = j.value("num_classes", 91);
    for (const auto & t : j.at("tensors")) {
        schema_tensor st;
        st.name = t.at("name").get<std::string>();
        st.shape = t.at("shape").get<std::vector<int64_t>>();
        st.rule = t.at("rule").get<std::string>();
        st.a = t.at("A").get<double>();
        st.s = t.at("S").get<double>();
        st.class_axis = t.value("class_axis", -1);
        p.sch.tensors.push_back(std::move(st));
    }
    for (const auto & st : p.sch.tensors) {
        p.index[st.name] = &st;
    }
    if (p.index.size() != p.sch.tensors.size() || (j.contains("count") && j["count"] != p.sch.tensors.size())) {
        throw error("schema_get: the embedded schema has duplicate names or a wrong 'count'; fix sidecar/schema/rfdetr-base.json");
    }
    return p;
}

const parsed_schema & parsed() {
    static const parsed_schema p = parse_schema();
    return p;
}

}  // namespace

const schema_tensor * schema::find(const std::string & name) const {
    const auto & idx = parsed().index;
    auto         it  = idx.find(name);
    return it == idx.end() ? nullptr : it->second;
}

const schema & schema_get() {
    return parsed().sch;
}

}  // namespace rfdetr
