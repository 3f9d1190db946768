#include "server/shm.h"

#include "protocol/protocol.h"

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <dirent.h>
#include <fcntl.h>
#include <linux/magic.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <unistd.h>

namespace rfdetr {

namespace {

constexpr const char * k_file_prefix = "rfdetr-shm-";
constexpr const char * k_dir_prefix  = "rfdetr-sidecar-";

std::string errno_text() {
    return std::strerror(errno);
}

bool pid_dead(const char * digits) {
    char *     end = nullptr;
    const long pid = std::strtol(digits, &end, 10);
    return end != digits && pid > 0 && kill(static_cast<pid_t>(pid), 0) != 0 && errno == ESRCH;
}

// Unlinks entries of `dir` named <prefix><dead pid>-...; with `dirs`, removes such directories and their files.
void sweep_stale(const std::string & dir, const char * prefix, bool dirs) {
    DIR * d = opendir(dir.c_str());
    if (!d) {
        return;
    }
    const size_t n = std::strlen(prefix);
    while (dirent * e = readdir(d)) {
        if (std::strncmp(e->d_name, prefix, n) != 0 || !pid_dead(e->d_name + n)) {
            continue;
        }
        const std::string p = dir + "/" + e->d_name;
        struct stat       st{};
        if (lstat(p.c_str(), &st) != 0 || st.st_uid != geteuid()) {
            continue;
        }
        if (dirs && S_ISDIR(st.st_mode)) {
            sweep_stale(p, k_file_prefix, false);
            if (rmdir(p.c_str()) == 0) {
                std::fprintf(stderr, "shm_dir_open: removed %s, left by a sidecar that is gone\n", p.c_str());
            }
        } else if (!dirs && S_ISREG(st.st_mode) && unlink(p.c_str()) == 0) {
            std::fprintf(stderr, "shm_dir_open: removed %s, left by a sidecar that is gone\n", p.c_str());
        }
    }
    closedir(d);
}

bool private_tmpfs(const std::string & dir) {
    struct statfs fs{};
    struct stat   st{};
    return statfs(dir.c_str(), &fs) == 0 && fs.f_type == TMPFS_MAGIC && stat(dir.c_str(), &st) == 0 &&
           S_ISDIR(st.st_mode) && st.st_uid == geteuid() && (st.st_mode & 0077) == 0;
}

}  // namespace

shm_dir shm_dir_open(const std::string & socket_path) {
    shm_dir     d;
    const auto  slash      = socket_path.rfind('/');
    std::string socket_dir = slash == std::string::npos ? "." : socket_path.substr(0, slash == 0 ? 1 : slash);
    if (!socket_path.empty() && private_tmpfs(socket_dir)) {
        sweep_stale(socket_dir, k_file_prefix, false);
        d.path = socket_dir;
        return d;
    }
    const std::string base = "/dev/shm";
    struct statfs     fs{};
    if (statfs(base.c_str(), &fs) != 0 || fs.f_type != TMPFS_MAGIC) {
        d.why_not = "neither the socket's directory (" + socket_dir + ") nor /dev/shm is a private tmpfs";
        return d;
    }
    sweep_stale(base, k_dir_prefix, true);
    const std::string path = base + "/" + k_dir_prefix + std::to_string(getpid());
    if (mkdir(path.c_str(), 0700) != 0) {
        d.why_not = "cannot create " + path + ": " + errno_text();
        return d;
    }
    d.path    = path;
    d.created = true;
    return d;
}

void shm_dir_close(shm_dir & d) {
    if (d.created && !d.path.empty()) {
        sweep_stale(d.path, k_file_prefix, false);
        rmdir(d.path.c_str());
    }
    d = shm_dir{};
}

struct shm_slots::mapping {
    int     fd   = -1;
    void *  base = MAP_FAILED;
    ~mapping() {
        if (base != MAP_FAILED) {
            munmap(base, k_shm_slot_bytes);
        }
        if (fd >= 0) {
            close(fd);
        }
    }
};

std::unique_ptr<shm_slots> shm_slots::create(const std::string & dir, uint64_t serial, std::string & err) {
    std::unique_ptr<shm_slots> s(new shm_slots());
    for (int i = 0; i < k_shm_slots; i++) {
        const std::string name =
            std::string(k_file_prefix) + std::to_string(getpid()) + "-" + std::to_string(serial) + "-" + std::to_string(i);
        const std::string path = dir + "/" + name;
        auto              m    = std::make_shared<mapping>();
        m->fd                  = open(path.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
        if (m->fd < 0) {
            err = "cannot create " + path + ": " + errno_text();
            return nullptr;
        }
        s->paths_.push_back(path);
        s->names_.push_back(name);
        if (ftruncate(m->fd, static_cast<off_t>(k_shm_slot_bytes)) != 0) {
            err = "cannot size " + path + ": " + errno_text();
            return nullptr;  // the destructor unlinks what was created
        }
        m->base = mmap(nullptr, k_shm_slot_bytes, PROT_READ, MAP_SHARED, m->fd, 0);
        if (m->base == MAP_FAILED) {
            err = "cannot map " + path + ": " + errno_text();
            return nullptr;
        }
        s->maps_.push_back(std::move(m));
    }
    return s;
}

shm_slots::~shm_slots() {
    unlink_all();
}

void shm_slots::unlink_all() {
    if (!linked_) {
        return;
    }
    linked_ = false;
    for (const auto & p : paths_) {
        unlink(p.c_str());
    }
}

std::string shm_slots::resolve(const std::string & name, uint64_t offset, uint64_t length, uint64_t width,
                               uint64_t height, const uint8_t *& data, std::shared_ptr<const void> & keep) {
    size_t i = 0;
    while (i < names_.size() && names_[i] != name) {
        i++;
    }
    if (i == names_.size()) {
        std::string known;
        for (const auto & n : names_) {
            known += (known.empty() ? "" : ", ") + n;
        }
        return "image_shm.name '" + name + "' is not one of this connection's slots (" + known +
               "); send shm_attach on this connection and use the names it returned";
    }
    // The sides first: with them at most 8192, width*height*3 cannot wrap (a reference of 2^63 x 2 pixels and
    // length 0 would otherwise match), and no reference describes an image the protocol forbids.
    if (width < 1 || height < 1 || width > k_max_image_side || height > k_max_image_side) {
        return "image_shm describes a " + std::to_string(width) + "x" + std::to_string(height) +
               " image; expected width and height from 1 to " + std::to_string(k_max_image_side);
    }
    if (length != width * height * 3) {
        return "image_shm.length is " + std::to_string(length) + "; expected " + std::to_string(width) + "*" +
               std::to_string(height) + "*3 = " + std::to_string(width * height * 3) + " (RGB u8, row-major)";
    }
    struct stat st{};
    const auto & m = maps_[i];
    if (offset > k_shm_slot_bytes || length > k_shm_slot_bytes - offset || fstat(m->fd, &st) != 0 ||
        static_cast<uint64_t>(st.st_size) < offset + length) {
        return "image_shm range " + std::to_string(offset) + "+" + std::to_string(length) + " is outside slot '" +
               name + "' (" + std::to_string(std::min<uint64_t>(k_shm_slot_bytes, static_cast<uint64_t>(st.st_size))) +
               " bytes)";
    }
    unlink_all();
    data = static_cast<const uint8_t *>(m->base) + offset;
    keep = m;
    return "";
}

}  // namespace rfdetr
