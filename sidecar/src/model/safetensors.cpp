#include "model/safetensors.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <nlohmann/json.hpp>

#include "common/error.h"
#include "model/schema.h"

namespace rfdetr {

namespace {

[[noreturn]] void st_fail(const std::string & file, const std::string & what) {
    throw error(file + ": not a valid safetensors file: " + what +
                ". Re-download or regenerate the checkpoint (e.g. rfdetr weights fetch / rfdetr weights synth).");
}

int dtype_bytes(const std::string & dtype) {
    static const std::map<std::string, int> sizes = {
        { "F64", 8 }, { "F32", 4 }, { "F16", 2 }, { "BF16", 2 }, { "I64", 8 }, { "I32", 4 }, { "I16", 2 },
        { "I8", 1 },  { "U64", 8 }, { "U32", 4 }, { "U16", 2 },  { "U8", 1 },   { "BOOL", 1 }, { "F8_E4M3", 1 },
        { "F8_E5M2", 1 },
    };
    auto it = sizes.find(dtype);
    return it == sizes.end() ? 0 : it->second;
}

std::string clip(const std::string & s, size_t n = 80) {
    return s.size() <= n ? s : s.substr(0, n) + "...";
}

}  // namespace

std::string printable_clip(const std::string & s, size_t n) {
    std::string out;
    for (size_t i = 0; i < s.size() && out.size() < n; i++) {
        const unsigned char c = static_cast<unsigned char>(s[i]);
        out += (c >= 0x20 && c < 0x7f) ? static_cast<char>(c) : '?';
    }
    return s.size() > n ? out + "..." : out;
}

st_header safetensors_parse(const std::string & file, const uint8_t * bytes, size_t size) {
    if (size < 8) {
        st_fail(file, "the file is " + std::to_string(size) + " bytes, shorter than the 8-byte header length" +
                          (size == 0 ? " (empty file)" : ""));
    }
    uint64_t n = 0;
    for (int i = 7; i >= 0; i--) {
        n = (n << 8) | bytes[i];
    }
    if (n < 2 || n > k_st_max_header_bytes) {
        st_fail(file, "header length " + std::to_string(n) + " is outside 2.." + std::to_string(k_st_max_header_bytes) +
                          " (not a safetensors file?)");
    }
    if (n > size - 8) {
        st_fail(file, "header length " + std::to_string(n) + " runs past the end of the " + std::to_string(size) +
                          "-byte file (truncated?)");
    }
    st_header h;
    h.header_bytes = n;
    h.data_offset  = 8 + n;
    const char *   text = reinterpret_cast<const char *>(bytes + 8);
    nlohmann::json j;
    try {
        j = nlohmann::json::parse(text, text + n);
    } catch (const nlohmann::json::exception & e) {
        st_fail(file, "the header is not valid JSON (" + printable_clip(e.what(), 200) + ")");
    }
    if (!j.is_object()) {
        st_fail(file, std::string("the header is a JSON ") + j.type_name() + ", expected an object");
    }
    const uint64_t data_size = size - h.data_offset;
    for (auto it = j.begin(); it != j.end(); ++it) {
        const std::string & name = it.key();
        const auto &        v    = it.value();
        if (name == "__metadata__") {
            if (!v.is_object()) {
                st_fail(file, "__metadata__ is a JSON " + std::string(v.type_name()) + ", expected an object of strings");
            }
            for (auto m = v.begin(); m != v.end(); ++m) {
                if (!m.value().is_string()) {
                    st_fail(file, "__metadata__ value '" + clip(m.key()) + "' is not a string");
                }
                h.metadata[m.key()] = m.value().get<std::string>();
            }
            continue;
        }
        const std::string tn = "tensor '" + clip(name) + "'";
        if (!v.is_object()) {
            st_fail(file, tn + " entry is a JSON " + std::string(v.type_name()) + ", expected an object");
        }
        st_tensor t;
        t.name = name;
        auto dt = v.find("dtype");
        if (dt == v.end() || !dt->is_string()) {
            st_fail(file, tn + " has no string 'dtype'");
        }
        t.dtype       = dt->get<std::string>();
        const int esz = dtype_bytes(t.dtype);
        if (esz == 0) {
            st_fail(file, tn + " has unknown dtype '" + clip(t.dtype) + "'");
        }
        if (t.dtype != "F32") {
            st_fail(file, tn + " has dtype " + t.dtype + "; RF-DETR-base checkpoints are F32 only (convert it to float32)");
        }
        auto sh = v.find("shape");
        if (sh == v.end() || !sh->is_array() || sh->size() > 8) {
            st_fail(file, tn + " has no 'shape' array of at most 8 dimensions");
        }
        uint64_t numel = 1;
        for (const auto & d : *sh) {
            if (!d.is_number_unsigned()) {
                st_fail(file, tn + " has shape " + clip(sh->dump()) + "; dimensions must be non-negative integers");
            }
            const uint64_t dim = d.get<uint64_t>();
            if (dim > (uint64_t(1) << 40) || (dim != 0 && numel > (uint64_t(1) << 40) / dim)) {
                st_fail(file, tn + " has an absurd shape " + clip(sh->dump()));
            }
            numel *= dim;
            t.shape.push_back(static_cast<int64_t>(dim));
        }
        auto off = v.find("data_offsets");
        if (off == v.end() || !off->is_array() || off->size() != 2 || !(*off)[0].is_number_unsigned() ||
            !(*off)[1].is_number_unsigned()) {
            st_fail(file, tn + " has no 'data_offsets' pair of non-negative integers");
        }
        t.begin = (*off)[0].get<uint64_t>();
        t.end   = (*off)[1].get<uint64_t>();
        const uint64_t want = numel * esz;
        if (t.end < t.begin || t.end - t.begin != want) {
            st_fail(file, tn + " has data_offsets [" + std::to_string(t.begin) + ", " + std::to_string(t.end) + "] but " +
                              t.dtype + shape_str(t.shape) + " needs " + std::to_string(want) + " bytes");
        }
        if (t.end > data_size) {
            st_fail(file, tn + " ends at data byte " + std::to_string(t.end) + " but the data section is " +
                              std::to_string(data_size) + " bytes (truncated?)");
        }
        h.tensors.push_back(std::move(t));
    }
    // Tensors must tile the data section exactly: sorted by offset, each starts where the previous ended.
    std::vector<const st_tensor *> by_off;
    for (const auto & t : h.tensors) {
        by_off.push_back(&t);
    }
    std::sort(by_off.begin(), by_off.end(), [](const st_tensor * a, const st_tensor * b) {
        return a->begin != b->begin ? a->begin < b->begin : a->end < b->end;
    });
    uint64_t pos = 0;
    const st_tensor * prev = nullptr;
    for (const st_tensor * t : by_off) {
        if (t->begin < pos) {
            st_fail(file, "tensors '" + clip(prev->name) + "' [" + std::to_string(prev->begin) + ", " +
                              std::to_string(prev->end) + ") and '" + clip(t->name) + "' [" + std::to_string(t->begin) +
                              ", " + std::to_string(t->end) + ") overlap");
        }
        if (t->begin > pos) {
            st_fail(file, "data bytes [" + std::to_string(pos) + ", " + std::to_string(t->begin) +
                              ") belong to no tensor (a gap before '" + clip(t->name) + "')");
        }
        pos  = t->end;
        prev = t;
    }
    if (pos != data_size) {
        st_fail(file, "the tensors cover " + std::to_string(pos) + " data bytes but the data section is " +
                          std::to_string(data_size) + " bytes (trailing garbage or a corrupt header)");
    }
    std::sort(h.tensors.begin(), h.tensors.end(), [](const st_tensor & a, const st_tensor & b) { return a.name < b.name; });
    return h;
}

mapped_file::mapped_file(const std::string & path) {
    int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        const int e = errno;
        throw error(path + ": cannot open (" + std::strerror(e) + ")" +
                    (e == ENOENT ? "; expected model.safetensors in the weights directory (rfdetr weights fetch, or "
                                   "rfdetr weights synth --seed N --out DIR for synthetic weights)"
                                 : ""));
    }
    struct stat st {};
    if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        ::close(fd);
        throw error(path + ": not a regular file; expected the model.safetensors checkpoint");
    }
    size_ = static_cast<size_t>(st.st_size);
    if (size_ > 0) {
        void * p = ::mmap(nullptr, size_, PROT_READ, MAP_PRIVATE, fd, 0);
        if (p == MAP_FAILED) {
            const int e = errno;
            ::close(fd);
            throw error(path + ": mmap of " + std::to_string(size_) + " bytes failed (" + std::strerror(e) + ")");
        }
        data_ = static_cast<const uint8_t *>(p);
    }
    ::close(fd);
}

mapped_file::~mapped_file() {
    if (data_) {
        ::munmap(const_cast<uint8_t *>(data_), size_);
    }
}

}  // namespace rfdetr
