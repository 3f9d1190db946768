#include "model/checkpoint.h"

#include <sys/stat.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>
#include <unordered_map>

#include "engines/engine.h"
#include "model/schema.h"

namespace rfdetr {

int64_t tensor_view::numel() const {
    int64_t n = 1;
    for (int64_t d : shape) {
        n *= d;
    }
    return n;
}

namespace {

constexpr size_t  k_list_max         = 20;
constexpr int64_t k_max_config_bytes = 16 * 1024 * 1024;

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

}  // namespace

int checkpoint_check_tensors(const std::string & file, const st_header & header) {
    const schema & sch = schema_get();
    std::unordered_map<std::string, const st_tensor *> have;
    for (const auto & t : header.tensors) {
        have[t.name] = &t;
    }
    std::vector<std::string> missing;
    std::vector<std::string> unexpected;
    for (const auto & st : sch.tensors) {
        if (!have.count(st.name)) {
            missing.push_back(st.name);
        }
    }
    for (const auto & t : header.tensors) {  // sorted by name
        if (!sch.find(t.name)) {
            unexpected.push_back(t.name);
        }
    }
    if (!missing.empty() || !unexpected.empty()) {
        std::string msg = file + ": not an " + sch.model + " checkpoint: the tensor names do not match the " +
                          std::to_string(sch.tensors.size()) + "-tensor schema (" + std::to_string(missing.size()) +
                          " missing, " + std::to_string(unexpected.size()) + " unexpected).";
        if (!missing.empty()) {
            msg += "\n  missing (" + std::to_string(missing.size()) + "):" + name_list(missing);
        }
        if (!unexpected.empty()) {
            msg += "\n  unexpected (" + std::to_string(unexpected.size()) + "):" + name_list(unexpected);
        }
        // A state dict saved from a wrapper module carries a prefix ("model.", "module."): say so.
        std::map<std::string, size_t> prefixes;
        for (const auto & name : unexpected) {
            for (size_t dot = name.find('.'); dot != std::string::npos; dot = name.find('.', dot + 1)) {
                if (sch.find(name.substr(dot + 1))) {
                    prefixes[name.substr(0, dot + 1)]++;
                    break;
                }
            }
        }
        for (const auto & [prefix, count] : prefixes) {
            if (count * 2 >= missing.size() && !missing.empty()) {
                msg += "\n  " + std::to_string(count) + " unexpected keys are schema keys under the prefix '" + prefix +
                       "': the state dict was saved from a wrapper module; strip the prefix from the key names.";
            }
        }
        msg += "\n  Use the Roboflow/rf-detr-base checkpoint (or a fine-tune of RF-DETR-base) in safetensors format "
               "with its original key names.";
        throw error(msg);
    }

    const st_tensor & cls = *have.at("class_embed.weight");
    if (cls.shape.size() != 2 || cls.shape[0] < 1) {
        throw error(file + ": tensor 'class_embed.weight' has shape " + shape_str(cls.shape) +
                    "; expected [num_classes >= 1, 256]. The checkpoint is not RF-DETR-base.");
    }
    const int64_t num_classes = cls.shape[0];
    if (num_classes > 100000) {
        throw error(file + ": tensor 'class_embed.weight' has " + std::to_string(num_classes) +
                    " rows (classes); more than 100000 is not a detection head. The checkpoint is corrupt.");
    }

    std::vector<std::string> bad;
    for (const auto & st : sch.tensors) {
        const st_tensor &          t    = *have.at(st.name);
        const std::vector<int64_t> want = st.shape_for(num_classes);
        if (t.shape == want) {
            continue;
        }
        std::string line = st.name + " has shape " + shape_str(t.shape) + ", expected " + shape_str(want);
        if (st.class_axis >= 0 && t.shape.size() == want.size()) {
            bool only_class_axis = true;
            for (size_t i = 0; i < want.size(); i++) {
                only_class_axis &= (static_cast<int>(i) == st.class_axis) || t.shape[i] == want[i];
            }
            if (only_class_axis) {
                line = st.name + " has " + std::to_string(t.shape[st.class_axis]) + " classes (axis " +
                       std::to_string(st.class_axis) + ") but class_embed.weight has " + std::to_string(num_classes) +
                       " rows; all class-dependent tensors must agree";
            }
        }
        bad.push_back(line);
    }
    if (!bad.empty()) {
        throw error(file + ": " + std::to_string(bad.size()) + " tensor" + (bad.size() == 1 ? "" : "s") +
                    " do not have the " + sch.model + " shape (class count " + std::to_string(num_classes) +
                    " from class_embed.weight rows):" + name_list(bad) +
                    "\n  The checkpoint is not RF-DETR-base, or is damaged.");
    }
    return static_cast<int>(num_classes);
}

namespace {

std::string read_text_file(const std::string & path, const std::string & what_for) {
    struct stat st {};
    if (::stat(path.c_str(), &st) != 0) {
        throw error(path + ": cannot open (" + std::strerror(errno) + "); " + what_for);
    }
    if (!S_ISREG(st.st_mode)) {
        throw error(path + ": not a regular file; " + what_for);
    }
    if (st.st_size > k_max_config_bytes) {
        throw error(path + ": is " + std::to_string(st.st_size) + " bytes; a config.json is a few kB (at most " +
                    std::to_string(k_max_config_bytes) + "): wrong file? " + what_for);
    }
    std::ifstream in(path, std::ios::binary);
    if (!in) {
        throw error(path + ": cannot open (" + std::strerror(errno) + "); " + what_for);
    }
    std::stringstream ss;
    ss << in.rdbuf();
    if (in.bad()) {
        throw error(path + ": read failed; " + what_for);
    }
    return ss.str();
}

class mmap_checkpoint final : public checkpoint {
  public:
    explicit mmap_checkpoint(const std::string & weights_dir) : dir_(weights_dir) {
        std::string prefix = weights_dir;
        while (prefix.size() > 1 && prefix.back() == '/') {
            prefix.pop_back();
        }
        const std::string st_path  = prefix + "/model.safetensors";
        const std::string cfg_path = prefix + "/config.json";

        file_             = std::make_unique<mapped_file>(st_path);
        const st_header h = safetensors_parse(st_path, file_->data(), file_->size());
        num_classes_      = checkpoint_check_tensors(st_path, h);
        metadata_         = h.metadata;

        const std::string cfg_text =
            read_text_file(cfg_path, "a checkpoint directory needs config.json (with id2label: class index -> name) "
                                     "next to model.safetensors");
        model_config cfg = config_parse(cfg_path, cfg_text, num_classes_);
        labels_          = std::move(cfg.labels);
        auto syn         = metadata_.find("synthetic");
        synthetic_       = cfg.synthetic || (syn != metadata_.end() && syn->second == "true");

        // f32 needs 4-byte alignment; writers pad the header to 8, so the mapping is used in place. A header
        // that is not padded gets one aligned copy (correct, just slower and more memory).
        const uint8_t * base = file_->data() + h.data_offset;
        if (reinterpret_cast<uintptr_t>(base) % alignof(float) != 0) {
            std::fprintf(stderr,
                         "checkpoint_open: %s: header length %llu leaves the tensor data unaligned; copying %zu bytes "
                         "to aligned memory\n",
                         st_path.c_str(), static_cast<unsigned long long>(h.header_bytes),
                         static_cast<size_t>(file_->size() - h.data_offset));
            aligned_.resize((file_->size() - h.data_offset + sizeof(float) - 1) / sizeof(float));
            std::memcpy(aligned_.data(), base, file_->size() - h.data_offset);
            base = reinterpret_cast<const uint8_t *>(aligned_.data());
        }
        for (const auto & t : h.tensors) {
            tensor_view v;
            v.data  = reinterpret_cast<const float *>(base + t.begin);
            v.shape = t.shape;
            views_.emplace(t.name, std::move(v));
        }
    }

    const tensor_view & get(const std::string & name) const override {
        auto it = views_.find(name);
        if (it == views_.end()) {
            throw error("checkpoint::get: no tensor '" + name + "' in the " + schema_get().model +
                        " schema (sidecar/schema/rfdetr-base.json); this is a programming error in the caller");
        }
        return it->second;
    }

    int num_classes() const override { return num_classes_; }

    const std::vector<std::string> & labels() const override { return labels_; }

    const std::string & dir() const override { return dir_; }

    const std::map<std::string, std::string> & metadata() const override { return metadata_; }

    bool synthetic() const override { return synthetic_; }

  private:
    std::string                                  dir_;
    std::unique_ptr<mapped_file>                 file_;
    std::vector<float>                           aligned_;
    std::unordered_map<std::string, tensor_view> views_;
    std::map<std::string, std::string>           metadata_;
    std::vector<std::string>                     labels_;
    int                                          num_classes_ = 0;
    bool                                         synthetic_   = false;
};

}  // namespace

std::unique_ptr<checkpoint> checkpoint::open(const std::string & weights_dir) {
    return std::make_unique<mmap_checkpoint>(weights_dir);
}

}  // namespace rfdetr
