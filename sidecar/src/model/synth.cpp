#include "model/synth.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <nlohmann/json.hpp>
#include <vector>

#include "common/error.h"
#include "model/schema.h"

namespace rfdetr {

uint64_t synth_fnv1a64(const std::string & key) {
    uint64_t h = 0xcbf29ce484222325ull;
    for (unsigned char c : key) {
        h ^= c;
        h *= 0x100000001b3ull;
    }
    return h;
}

uint64_t synth_mix(uint64_t z) {
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

void synth_fill(float * dst, uint64_t seed, const std::string & key, size_t n, double a, double s, size_t first) {
    constexpr uint64_t gamma = 0x9e3779b97f4a7c15ull;
    const uint64_t     k     = seed ^ synth_fnv1a64(key);
    uint64_t           z     = k + static_cast<uint64_t>(first) * gamma;
    // S*u is exact and A + S*u is exact in double (SPEC §2), so the one rounding is the cast to float.
    for (size_t i = 0; i < n; i++) {
        z += gamma;
        const double u = static_cast<double>(synth_mix(z) >> 40) * 0x1p-23 - 1.0;
        dst[i]         = static_cast<float>(a + s * u);
    }
}

std::string synth_seed_hex(uint64_t seed) {
    char buf[24];
    std::snprintf(buf, sizeof buf, "0x%llx", static_cast<unsigned long long>(seed));
    return buf;
}

bool synth_parse_u64(const std::string & text, uint64_t & out) {
    const bool hex    = text.size() > 2 && text[0] == '0' && (text[1] == 'x' || text[1] == 'X');
    const size_t from = hex ? 2 : 0;
    if (text.size() == from) {
        return false;
    }
    uint64_t v = 0;
    const uint64_t base = hex ? 16 : 10;
    for (size_t i = from; i < text.size(); i++) {
        const char c = text[i];
        int        d;
        if (c >= '0' && c <= '9') {
            d = c - '0';
        } else if (hex && c >= 'a' && c <= 'f') {
            d = c - 'a' + 10;
        } else if (hex && c >= 'A' && c <= 'F') {
            d = c - 'A' + 10;
        } else {
            return false;
        }
        if (v > (UINT64_MAX - static_cast<uint64_t>(d)) / base) {
            return false;  // more than 64 bits
        }
        v = v * base + static_cast<uint64_t>(d);
    }
    out = v;
    return true;
}

namespace {

struct planned {
    const schema_tensor * st;
    int64_t               numel;
    uint64_t              begin;
};

std::vector<planned> plan(const synth_options & opts) {
    std::vector<planned> out;
    for (const auto & st : schema_get(opts.variant).tensors) {
        out.push_back({ &st, st.numel_for(opts.num_classes), 0 });
    }
    std::sort(out.begin(), out.end(), [](const planned & a, const planned & b) { return a.st->name < b.st->name; });
    uint64_t off = 0;
    for (auto & p : out) {
        p.begin = off;
        off += static_cast<uint64_t>(p.numel) * 4;
    }
    return out;
}

std::string json_str(const std::string & s) {
    return nlohmann::json(s).dump();
}

std::string header_for(const synth_options & opts, const std::vector<planned> & tensors) {
    std::string j = "{\"__metadata__\":{\"format\":\"pt\",\"generator\":\"rfdetr-synth v1\",\"num_classes\":\"" +
                    std::to_string(opts.num_classes) + "\",\"seed\":\"" + synth_seed_hex(opts.seed) +
                    "\",\"synthetic\":\"true\",\"variant\":" + json_str(opts.variant) + "}";
    for (const auto & p : tensors) {
        j += "," + json_str(p.st->name) + ":{\"dtype\":\"F32\",\"shape\":[";
        const auto shape = p.st->shape_for(opts.num_classes);
        for (size_t i = 0; i < shape.size(); i++) {
            j += (i ? "," : "") + std::to_string(shape[i]);
        }
        j += "],\"data_offsets\":[" + std::to_string(p.begin) + "," +
             std::to_string(p.begin + static_cast<uint64_t>(p.numel) * 4) + "]}";
    }
    j += "}";
    while ((8 + j.size()) % 8 != 0) {
        j += ' ';
    }
    std::string out(8, '\0');
    const uint64_t n = j.size();
    for (int i = 0; i < 8; i++) {
        out[i] = static_cast<char>((n >> (8 * i)) & 0xff);
    }
    return out + j;
}

// `patch` merged into `target`: objects field by field, everything else replaced.
void merge_into(nlohmann::ordered_json & target, const nlohmann::ordered_json & patch) {
    for (auto it = patch.begin(); it != patch.end(); ++it) {
        if (it.value().is_object() && target.contains(it.key()) && target[it.key()].is_object()) {
            merge_into(target[it.key()], it.value());
        } else {
            target[it.key()] = it.value();
        }
    }
}

std::string config_for(const synth_options & opts) {
    const schema &         sch = schema_get(opts.variant);
    nlohmann::ordered_json cfg = nlohmann::ordered_json::parse(coco_config_json_text());
    merge_into(cfg, nlohmann::ordered_json::parse(sch.config_json));
    cfg["_comment"] = "SYNTHETIC weights made by rfdetr-synth (SPEC v1, seed " + synth_seed_hex(opts.seed) +
                      "): random values, detections are meaningless. Config fields follow the " + sch.model +
                      " COCO config.json" + (opts.num_classes == 91 ? std::string() : " with " +
                      std::to_string(opts.num_classes) + " placeholder classes") + ".";
    cfg["synthetic"]      = true;
    cfg["synthetic_seed"] = synth_seed_hex(opts.seed);
    if (opts.num_classes != sch.num_classes) {
        nlohmann::ordered_json id2label = nlohmann::ordered_json::object();
        nlohmann::ordered_json label2id = nlohmann::ordered_json::object();
        for (int i = 0; i < opts.num_classes; i++) {
            id2label[std::to_string(i)]         = "class_" + std::to_string(i);
            label2id["class_" + std::to_string(i)] = i;
        }
        cfg["num_labels"] = opts.num_classes;
        cfg["id2label"]   = id2label;
        cfg["label2id"]   = label2id;
    }
    return cfg.dump(2) + "\n";
}

// Writes `bytes` chunks produced by `emit` to a temp file in `dir`; returns the temp path.
class temp_file {
  public:
    temp_file(const std::string & dir, const std::string & name) : final_(dir + "/" + name) {
        path_ = dir + "/." + name + ".tmp-" + std::to_string(::getpid());
        fd_   = ::open(path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
        if (fd_ < 0) {
            throw error("synth_write: cannot create " + path_ + " (" + std::strerror(errno) +
                        "); choose a writable --out directory");
        }
    }
    ~temp_file() {
        if (fd_ >= 0) {
            ::close(fd_);
        }
        if (!committed_) {
            ::unlink(path_.c_str());
        }
    }
    void write(const void * data, size_t n) {
        const char * p = static_cast<const char *>(data);
        while (n > 0) {
            const ssize_t w = ::write(fd_, p, n);
            if (w < 0 && errno == EINTR) {
                continue;
            }
            if (w <= 0) {
                throw error("synth_write: writing " + path_ + " failed (" + std::strerror(errno) +
                            "); is the disk full? (a checkpoint needs 120-550 MB)");
            }
            p += w;
            n -= static_cast<size_t>(w);
        }
    }
    void close_file() {
        if (::close(fd_) != 0) {
            fd_ = -1;
            throw error("synth_write: closing " + path_ + " failed (" + std::strerror(errno) + ")");
        }
        fd_ = -1;
    }
    void commit() {
        if (::rename(path_.c_str(), final_.c_str()) != 0) {
            throw error("synth_write: renaming " + path_ + " to " + final_ + " failed (" + std::strerror(errno) + ")");
        }
        committed_ = true;
    }

  private:
    std::string final_;
    std::string path_;
    int         fd_        = -1;
    bool        committed_ = false;
};

void make_dirs(const std::string & dir) {
    std::string cur;
    size_t      pos = 0;
    while (pos != std::string::npos) {
        pos = dir.find('/', pos + 1);
        cur = dir.substr(0, pos);
        if (cur.empty()) {
            continue;
        }
        if (::mkdir(cur.c_str(), 0755) != 0 && errno != EEXIST) {
            throw error("synth_write: cannot create directory " + cur + " (" + std::strerror(errno) + ")");
        }
    }
    struct stat st {};
    if (::stat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) {
        throw error("synth_write: " + dir + " is not a directory; choose another --out");
    }
}

}  // namespace

std::string synth_header(const synth_options & opts) {
    return header_for(opts, plan(opts));
}

void synth_write(const std::string & dir, const synth_options & opts) {
    if (opts.num_classes < 1 || opts.num_classes > 100000) {
        throw error("synth_write: num_classes " + std::to_string(opts.num_classes) + " is outside 1..100000");
    }
    if (dir.empty()) {
        throw error("synth_write: empty output directory");
    }
    schema_get(opts.variant);  // an unknown variant is refused before anything is written
    make_dirs(dir);
    const std::vector<planned> tensors = plan(opts);

    temp_file cfg(dir, "config.json");
    const std::string cfg_text = config_for(opts);
    cfg.write(cfg_text.data(), cfg_text.size());
    cfg.close_file();

    temp_file         st(dir, "model.safetensors");
    const std::string header = header_for(opts, tensors);
    st.write(header.data(), header.size());
    int64_t max_numel = 0;
    for (const auto & p : tensors) {
        max_numel = std::max(max_numel, p.numel);
    }
    std::vector<float> buf(static_cast<size_t>(max_numel));
    static_assert(sizeof(float) == 4, "f32");
    for (const auto & p : tensors) {
        synth_fill(buf.data(), opts.seed, p.st->name, static_cast<size_t>(p.numel), p.st->a, p.st->s);
        st.write(buf.data(), static_cast<size_t>(p.numel) * 4);  // x86-64: host order is little-endian
    }
    st.close_file();

    cfg.commit();
    st.commit();
}

}  // namespace rfdetr
