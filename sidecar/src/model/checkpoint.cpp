#include "model/checkpoint.h"

#include <sys/stat.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <deque>
#include <fstream>
#include <sstream>
#include <unordered_map>

#include "common/error.h"
#include "model/identify.h"
#include "model/schema.h"

namespace rfdetr {

int64_t tensor_view::numel() const {
    int64_t n = 1;
    for (int64_t d : shape) {
        n *= d;
    }
    return n;
}

int checkpoint_check_tensors(const std::string & file, const st_header & header) {
    return checkpoint_identify(file, header).num_classes;
}

namespace {

constexpr int64_t k_max_config_bytes = 16 * 1024 * 1024;

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

        file_                          = std::make_unique<mapped_file>(st_path);
        const st_header             h  = safetensors_parse(st_path, file_->data(), file_->size());
        const identified_checkpoint id = checkpoint_identify(st_path, h);
        sch_                           = id.sch;
        layout_                        = id.layout;
        num_classes_                   = id.num_classes;
        metadata_                      = h.metadata;

        const std::string cfg_text =
            read_text_file(cfg_path, "a checkpoint directory needs config.json (with id2label: class index -> name) "
                                     "next to model.safetensors");
        model_config cfg = config_parse(cfg_path, cfg_text, *sch_, num_classes_);
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
        // Renamed tensors are used in place; the split q/k/v of the transformers layout are fused once here.
        for (size_t i = 0; i < sch_->tensors.size(); i++) {
            const auto & parts = id.sources[i];
            tensor_view  v;
            v.shape = sch_->tensors[i].shape_for(num_classes_);
            if (parts.size() == 1) {
                v.data = reinterpret_cast<const float *>(base + parts[0]->begin);
            } else {
                std::vector<float> & own = fused_.emplace_back(static_cast<size_t>(v.numel()));
                size_t               at  = 0;
                for (const st_tensor * p : parts) {
                    std::memcpy(own.data() + at, base + p->begin, p->end - p->begin);
                    at += (p->end - p->begin) / sizeof(float);
                }
                v.data = own.data();
            }
            views_.emplace(sch_->tensors[i].name, std::move(v));
        }
    }

    const tensor_view & get(const std::string & name) const override {
        auto it = views_.find(name);
        if (it == views_.end()) {
            throw error("checkpoint::get: no tensor '" + name + "' in the " + sch_->model + " schema (sidecar/schema/" +
                        sch_->file + "); this is a programming error in the caller");
        }
        return it->second;
    }

    int num_classes() const override { return num_classes_; }

    const schema & variant() const override { return *sch_; }

    const std::string & layout() const override { return layout_; }

    const std::vector<std::string> & labels() const override { return labels_; }

    const std::string & dir() const override { return dir_; }

    const std::map<std::string, std::string> & metadata() const override { return metadata_; }

    bool synthetic() const override { return synthetic_; }

  private:
    std::string                                  dir_;
    std::unique_ptr<mapped_file>                 file_;
    std::vector<float>                           aligned_;
    std::deque<std::vector<float>>               fused_;  // stable addresses
    const schema *                               sch_ = nullptr;
    std::string                                  layout_;
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
