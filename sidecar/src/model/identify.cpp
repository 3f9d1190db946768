#include "model/identify.h"

#include <algorithm>
#include <map>
#include <regex>
#include <set>
#include <tuple>
#include <unordered_map>

#include "common/error.h"

namespace rfdetr {

namespace {

constexpr size_t k_list_max = 20;

std::string name_list(const std::vector<std::string> & names) {
    std::string s;
    for (size_t i = 0; i < names.size() && i < k_list_max; i++) {
        s += "\n    " + names[i];
    }
    if (names.size() > k_list_max) {
        s += "\n    ... and " + std::to_string(names.size() - k_list_max) + " more";
    }
    return s;
}

// A tensor under its upstream name, made of one or more of the file's tensors.
struct mapped_tensor {
    std::vector<int64_t>          shape;
    std::vector<const st_tensor *> parts;
};

using mapped_set = std::map<std::string, mapped_tensor>;  // sorted by name, like a safetensors header

mapped_set map_upstream(const st_header & h) {
    mapped_set m;
    for (const auto & t : h.tensors) {
        m[t.name] = { t.shape, { &t } };
    }
    return m;
}

mapped_set map_transformers(const std::string & file, const st_header & h) {
    struct compiled {
        std::regex       re;
        const key_rule * rule;
    };
    static const std::vector<compiled> rules = [] {
        std::vector<compiled> out;
        for (const auto & r : transformers_key_map().rules) {
            out.push_back({ std::regex(r.native, std::regex::ECMAScript | std::regex::optimize), &r });
        }
        return out;
    }();
    std::vector<std::string>                                        unmatched;
    std::vector<std::string>                                        twice;
    std::map<std::string, std::map<int, const st_tensor *>>         fused;  // upstream -> part index -> tensor
    std::map<std::string, const key_rule *>                         fused_rule;
    mapped_set                                                      m;
    for (const auto & t : h.tensors) {
        const compiled * hit = nullptr;
        std::smatch      mt;
        for (const auto & c : rules) {
            if (std::regex_match(t.name, mt, c.re)) {
                hit = &c;
                break;
            }
        }
        if (!hit) {
            unmatched.push_back(t.name);
            continue;
        }
        const std::string up = mt.format(hit->rule->upstream);
        if (hit->rule->fuse_part > 0) {
            const auto & order = hit->rule->fuse_order;
            const int    part  = static_cast<int>(std::find(order.begin(), order.end(), mt[hit->rule->fuse_part].str()) - order.begin());
            if (!fused[up].emplace(part, &t).second) {
                twice.push_back(t.name);
            }
            fused_rule[up] = hit->rule;
        } else if (!m.emplace(up, mapped_tensor{ t.shape, { &t } }).second) {
            twice.push_back(t.name + " (-> " + up + ")");
        }
    }
    for (const auto & name : unmatched) {
        // transformers' RfDetrForInstanceSegmentation names its mask head in a layout transformers-keys.json does
        // not map (never checked against a saved file), so a Seg checkpoint is read only under upstream names.
        if (name.find("segmentation") != std::string::npos || name.find("mask") != std::string::npos) {
            throw error(file + ": transformers key names with a segmentation head (" + name +
                        "): RF-DETR Seg checkpoints are read only with upstream rfdetr key names "
                        "(segmentation_head.*, as rfdetr saves them); transformers' RfDetrForInstanceSegmentation "
                        "layout is not supported. Save the model's state_dict with rfdetr, or convert the key names.\n  " +
                        checkpoint_supported_text());
        }
    }
    if (!unmatched.empty() || !twice.empty()) {
        std::string msg = file + ": transformers (RfDetrForObjectDetection) key names, but ";
        if (!unmatched.empty()) {
            msg += std::to_string(unmatched.size()) + " key" + (unmatched.size() == 1 ? "" : "s") +
                   " match no rule of its RF-DETR detection layout:" + name_list(unmatched);
        }
        if (!twice.empty()) {
            msg += std::string(unmatched.empty() ? "" : "\n  and ") + std::to_string(twice.size()) +
                   " key(s) name a tensor another key already gives:" + name_list(twice);
        }
        throw error(msg + "\n  " + checkpoint_supported_text());
    }
    for (const auto & [up, parts] : fused) {
        const key_rule & r = *fused_rule.at(up);
        std::string      problem;
        mapped_tensor    mtens;
        for (size_t i = 0; i < r.fuse_order.size() && problem.empty(); i++) {
            auto it = parts.find(static_cast<int>(i));
            if (it == parts.end()) {
                problem = "its " + r.fuse_order[i] + " part is missing";
            } else if (!mtens.parts.empty() && it->second->shape != mtens.parts[0]->shape) {
                problem = "its parts have different shapes";
            } else {
                mtens.parts.push_back(it->second);
            }
        }
        if (problem.empty() && mtens.parts[0]->shape.empty()) {
            problem = "its parts are scalars";
        }
        if (!problem.empty()) {
            throw error(file + ": transformers key names: " + up + " is made of the split q/k/v tensors, but " + problem +
                        "; the checkpoint is incomplete or damaged");
        }
        mtens.shape = mtens.parts[0]->shape;
        mtens.shape[0] *= static_cast<int64_t>(mtens.parts.size());
        m.emplace(up, std::move(mtens));
    }
    return m;
}

// Names an unsupported kind from its keys and shapes, or "" when nothing says what it is.
std::string unsupported_kind(const mapped_set & m, const st_header & h) {
    bool seg_head = false;
    for (const auto & t : h.tensors) {
        seg_head |= t.name.rfind("segmentation_head.", 0) == 0;
        if (t.name.find("keypoint") != std::string::npos) {
            return "an RF-DETR keypoint checkpoint (it has " + t.name + "): keypoint heads are not served here";
        }
    }
    const std::string cls = "backbone.0.encoder.encoder.embeddings.cls_token";
    const std::string pe  = "backbone.0.encoder.encoder.embeddings.patch_embeddings.projection.weight";
    bool              vit = false, other_backbone = false;
    for (const auto & [name, t] : m) {
        vit |= name.rfind("backbone.0.encoder.encoder.", 0) == 0;
        other_backbone |= name.rfind("backbone.0.", 0) == 0 && name.rfind("backbone.0.projector.", 0) != 0 &&
                          name.rfind("backbone.0.encoder.encoder.", 0) != 0;
    }
    if (!vit && other_backbone) {
        return "a DETR checkpoint with another backbone (backbone.0.* tensors but no DINOv2 backbone.0.encoder.encoder.*)";
    }
    auto p = m.find(pe);
    if (p != m.end() && p->second.shape.size() == 4 && p->second.shape[2] == 12 && !seg_head) {
        return "a patch-12 DINOv2 backbone without segmentation_head.* tensors: only RF-DETR Seg models use patch 12, "
               "and they have a segmentation head (" + pe + " " + shape_str(p->second.shape) + ")";
    }
    auto c = m.find(cls);
    if (c != m.end() && c->second.shape.size() == 3) {
        const int64_t width   = c->second.shape[2];
        const bool    p3p5    = m.count("backbone.0.projector.stages_sampling.0.0.0.weight") > 0;
        if (width == 768 && !p3p5) {
            return "a ViT-B (768-wide) backbone with a single-level projector, as RF-DETR XLarge/2XLarge (rfdetr_plus) "
                   "use; only LargeDeprecated (ViT-B with the P3+P5 projector) is served with a ViT-B";
        }
        if (width != 384 && width != 768) {
            return "a " + std::to_string(width) + "-wide ViT backbone (" + cls + " " + shape_str(c->second.shape) +
                   "): only DINOv2-S (384) and, for LargeDeprecated, DINOv2-B (768) are served";
        }
    }
    return "";
}

struct fit {
    const schema *           sch = nullptr;
    std::vector<std::string> missing, unexpected, misshapen;
    int64_t                  num_classes = 0;
    size_t                   matched_loosely = 0;  // schema names present as is or under a wrapper prefix
    size_t                   key_errors() const { return missing.size() + unexpected.size(); }
};

fit fit_schema(const schema & sch, const mapped_set & m, const std::set<std::string> & suffixes) {
    fit f;
    f.sch = &sch;
    for (const auto & st : sch.tensors) {
        if (!m.count(st.name)) {
            f.missing.push_back(st.name);
        }
        f.matched_loosely += m.count(st.name) || suffixes.count(st.name);
    }
    for (const auto & [name, t] : m) {
        if (!sch.find(name)) {
            f.unexpected.push_back(name);
        }
    }
    if (f.key_errors() != 0) {
        return f;
    }
    const auto & cls = m.at("class_embed.weight").shape;
    f.num_classes    = cls.size() == 2 ? cls[0] : -1;
    for (const auto & st : sch.tensors) {
        const auto & got = m.at(st.name).shape;
        if (f.num_classes < 1) {
            break;
        }
        const std::vector<int64_t> want = st.shape_for(f.num_classes);
        if (got == want) {
            continue;
        }
        std::string line = st.name + " has shape " + shape_str(got) + ", expected " + shape_str(want);
        if (st.class_axis >= 0 && got.size() == want.size()) {
            bool only_class_axis = true;
            for (size_t i = 0; i < want.size(); i++) {
                only_class_axis &= (static_cast<int>(i) == st.class_axis) || got[i] == want[i];
            }
            if (only_class_axis) {
                line = st.name + " has " + std::to_string(got[st.class_axis]) + " classes (axis " +
                       std::to_string(st.class_axis) + ") but class_embed.weight has " + std::to_string(f.num_classes) +
                       " rows; all class-dependent tensors must agree";
            }
        }
        f.misshapen.push_back(line);
    }
    return f;
}

}  // namespace

std::string checkpoint_supported_text() {
    std::string variants;
    for (const auto & s : schemas_all()) {
        variants += (variants.empty() ? "" : ", ") + s.variant + " (" + s.model + ")";
    }
    return "Supported: RF-DETR detection and segmentation (Seg) checkpoints of the variants " + variants +
           ", with upstream rfdetr key names (or, for detection, transformers' RfDetrForObjectDetection names), any "
           "class count, in safetensors format.";
}

identified_checkpoint checkpoint_identify(const std::string & file, const st_header & header) {
    static const std::regex marker(transformers_key_map().marker, std::regex::ECMAScript);
    bool                    native = false;
    for (const auto & t : header.tensors) {
        native |= std::regex_search(t.name, marker);
    }
    const mapped_set m = native ? map_transformers(file, header) : map_upstream(header);

    const std::string kind = unsupported_kind(m, header);
    if (!kind.empty()) {
        throw error(file + ": " + kind + ".\n  " + checkpoint_supported_text());
    }

    std::set<std::string> suffixes;  // every name with leading dotted components dropped
    for (const auto & [name, t] : m) {
        for (size_t dot = name.find('.'); dot != std::string::npos; dot = name.find('.', dot + 1)) {
            suffixes.insert(name.substr(dot + 1));
        }
    }
    std::vector<fit> fits;
    for (const auto & sch : schemas_all()) {
        fits.push_back(fit_schema(sch, m, suffixes));
    }
    const fit * best = nullptr;
    for (const auto & f : fits) {
        if (f.key_errors() == 0 && f.num_classes >= 1 && f.misshapen.empty()) {
            best = &f;
            break;
        }
    }
    if (!best) {
        // The closest schema: most names found (a wrapper prefix forgiven), then fewest key differences,
        // then fewest misshapen tensors.
        const auto rank = [](const fit & f) {
            return std::make_tuple(-static_cast<long>(f.matched_loosely), f.key_errors(), f.misshapen.size());
        };
        const fit * close = &fits[0];
        for (const auto & f : fits) {
            if (rank(f) < rank(*close)) {
                close = &f;
            }
        }
        const schema & sch = *close->sch;
        if (close->key_errors() != 0) {
            std::string msg = file + ": not an RF-DETR checkpoint of a supported variant: the tensor names match no "
                              "variant's schema; the closest is " + sch.model + " (" + std::to_string(sch.tensors.size()) +
                              "-tensor schema: " + std::to_string(close->missing.size()) + " missing, " +
                              std::to_string(close->unexpected.size()) + " unexpected).";
            if (!close->missing.empty()) {
                msg += "\n  missing (" + std::to_string(close->missing.size()) + "):" + name_list(close->missing);
            }
            if (!close->unexpected.empty()) {
                msg += "\n  unexpected (" + std::to_string(close->unexpected.size()) + "):" + name_list(close->unexpected);
            }
            // A state dict saved from a wrapper module carries a prefix ("model.", "module."): say so.
            std::map<std::string, size_t> prefixes;
            for (const auto & name : close->unexpected) {
                for (size_t dot = name.find('.'); dot != std::string::npos; dot = name.find('.', dot + 1)) {
                    if (sch.find(name.substr(dot + 1))) {
                        prefixes[name.substr(0, dot + 1)]++;
                        break;
                    }
                }
            }
            for (const auto & [prefix, count] : prefixes) {
                if (count * 2 >= close->missing.size() && !close->missing.empty()) {
                    msg += "\n  " + std::to_string(count) + " unexpected keys are schema keys under the prefix '" +
                           prefix + "': the state dict was saved from a wrapper module; strip the prefix from the key names.";
                }
            }
            throw error(msg + "\n  " + checkpoint_supported_text());
        }
        if (close->num_classes < 1) {
            throw error(file + ": tensor 'class_embed.weight' has shape " + shape_str(m.at("class_embed.weight").shape) +
                        "; expected [num_classes >= 1, " + std::to_string(sch.arch.d_model) + "]. The checkpoint is not " +
                        sch.model + ", or is damaged.");
        }
        throw error(file + ": " + std::to_string(close->misshapen.size()) + " tensor" +
                    (close->misshapen.size() == 1 ? "" : "s") + " do not have the " + sch.model +
                    " shape (class count " + std::to_string(close->num_classes) + " from class_embed.weight rows):" +
                    name_list(close->misshapen) + "\n  The checkpoint is not " + sch.model +
                    " (the variant its tensor names match), or is damaged.\n  " + checkpoint_supported_text());
    }
    if (best->num_classes > 100000) {
        throw error(file + ": tensor 'class_embed.weight' has " + std::to_string(best->num_classes) +
                    " rows (classes); more than 100000 is not a detection head. The checkpoint is corrupt.");
    }
    identified_checkpoint out;
    out.sch         = best->sch;
    out.num_classes = static_cast<int>(best->num_classes);
    out.layout      = native ? "transformers" : "upstream";
    for (const auto & st : out.sch->tensors) {
        out.sources.push_back(m.at(st.name).parts);
    }
    return out;
}

}  // namespace rfdetr
