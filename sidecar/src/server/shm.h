// Frames over shared memory: the 0700 directory the slot files live in (chosen once at startup) and one
// connection's slot files. A client writes a decoded image into a slot file and sends a reference to it
// (image_shm) instead of the bytes; the sidecar reads the pixels through its own read-only mapping.
// A 4000x3000 frame is 36 MB: through the socket it is copied by the client's write, the kernel and the
// sidecar's read; through a slot it is written once into page-cache pages the sidecar already maps.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace rfdetr {

// Slots per connection: one per frame in flight (the TypeScript client keeps at most two).
constexpr int k_shm_slots = 2;
// Each slot file is sized for the largest image (8192x8192 RGB); tmpfs files are sparse, so only the pages a
// client writes take memory.
constexpr uint64_t k_shm_slot_bytes = 8192ull * 8192ull * 3ull;

struct shm_dir {
    std::string path;     // "" when shared memory is unavailable
    std::string why_not;  // why, when it is
    bool        created = false;  // the directory is ours (removed at exit)
};

// The socket's directory when it is a tmpfs owned by us with mode 0700, else a fresh
// /dev/shm/rfdetr-sidecar-<pid> (0700). Stale slot files and directories of dead sidecars are removed first.
shm_dir shm_dir_open(const std::string & socket_path);
// Removes the directory when it is ours (its slot files are already gone).
void shm_dir_close(shm_dir & d);

class shm_slots {
  public:
    // Creates k_shm_slots sparse files rfdetr-shm-<pid>-<serial>-<i> (0600) in `dir`, each mapped read-only.
    // nullptr and `err` when the directory refuses them.
    static std::unique_ptr<shm_slots> create(const std::string & dir, uint64_t serial, std::string & err);
    ~shm_slots();

    shm_slots(const shm_slots &)             = delete;
    shm_slots & operator=(const shm_slots &) = delete;

    const std::vector<std::string> & paths() const { return paths_; }

    // Turns a reference into the mapped bytes, or returns what is wrong with it: a name that is not one of
    // this connection's slots, a side outside 1..8192, a range outside the slot file, a length other than
    // width*height*3.
    // `keep` holds the mapping alive until the job that reads it is done, even after the connection left.
    // The first reference unlinks every slot file: the client opened them all before sending one, so from
    // then on nothing is left behind even if the process is killed.
    std::string resolve(const std::string & name, uint64_t offset, uint64_t length, uint64_t width, uint64_t height,
                        const uint8_t *& data, std::shared_ptr<const void> & keep);

  private:
    struct mapping;
    shm_slots() = default;
    void unlink_all();

    std::vector<std::string>              paths_;
    std::vector<std::string>              names_;
    std::vector<std::shared_ptr<mapping>> maps_;
    bool                                  linked_ = true;
};

}  // namespace rfdetr
