// The preprocess + forward pipeline: requests go in FIFO order (over all connections) through a resize
// stage and the engine, one forward at a time. For an engine that does not compute on the host's cores
// (its registry row's host_cores false, e.g. a TT card) a stage thread resizes request N+1 while request N is on
// the engine, with one prepared input waiting at most (two input buffers); for host engines the forward
// thread resizes just before each forward, so the resize never competes with the engine's threads. An image
// file (image_encoded) is decoded by the same thread right before its resize, into a buffer the pipeline keeps.
#pragma once

#include "decode/decode.h"
#include "engines/engine.h"
#include "preprocess/preprocess.h"
#include "server/frame-pool.h"

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

namespace rfdetr {

struct infer_job {
    uint64_t        conn_serial = 0;
    uint64_t        id          = 0;
    frame_bytes     payload;  // owns the bytes below
    const uint8_t * rgb    = nullptr;  // the image form: RGB u8 width x height
    int             width  = 0;
    int             height = 0;
    const uint8_t * encoded      = nullptr;  // the image_encoded form: the file, decoded to width x height first
    size_t          encoded_size = 0;
    encoded_format  format       = encoded_format::jpeg;
    const uint8_t * pixels = nullptr;  // the pixel_values form: f32 [3,S,S], maybe misaligned
    std::shared_ptr<const void> shm_keep;  // the image_shm form: keeps the slot mapping `rgb` points into
    std::optional<row_select>   select;    // the request's row selection for a selected output (none: 0 rows)
};

struct job_key {
    uint64_t conn_serial;
    uint64_t id;
};

struct finished_reply {
    uint64_t             conn_serial;
    std::vector<uint8_t> frame;
};

class pipeline {
  public:
    // `wake` is called (from a pipeline thread) after a reply is ready for take_done(); payloads go back
    // to `pool` once their input is prepared. `host_cores`: the engine computes on this machine's cores
    // (engine_entry::host_cores), so the resize runs on the forward thread.
    pipeline(engine & eng, bool host_cores, int input_size, frame_pool & pool, std::function<void()> wake);
    ~pipeline();

    bool overlaps() const { return overlap_; }

    void submit(infer_job j);

    // Removes requests not yet on the engine (of one connection, or all when serial == 0) and returns them
    // for the caller to answer (or drop). A request being resized at that moment is finished by the stage
    // thread: dropped for a connection, answered E_STOPPING when everything is taken (serial == 0).
    std::vector<job_key> take_queued(uint64_t serial);

    std::vector<finished_reply> take_done();

    bool idle();  // nothing queued, resizing or on the engine

    void stop();  // finishes the forward in progress, joins the threads

  private:
    struct prep_times {
        double decode_ms     = 0.0;
        double preprocess_ms = 0.0;
        bool   decoded       = false;  // an image_encoded request: the reply carries decode_ms
    };
    struct prepared {
        uint64_t   conn_serial;
        uint64_t   id;
        int                       slot;
        prep_times                times;
        std::optional<row_select> select;
    };
    enum class cancel { none, dropped, stopping };

    // Decodes j's file (image_encoded) and resizes it, resizes its image, or copies its pixel_values, into
    // slot; returns the times in ms (preprocess 0 for pixel_values). Throws decode_declined for a file the
    // decoder will not read (answered E_DECODE), anything else for a failure (E_FORWARD).
    prep_times prepare(infer_job & j, int slot);
    // The decode buffer, at least `bytes` long (grown without zero fill); trim_decoded() frees it when it
    // holds more than k_decoded_keep_bytes, so one huge file does not pin its pixels.
    uint8_t * decoded_buffer(size_t bytes);
    void      trim_decoded();
    // The error reply for a failed prepare(): E_DECODE when it was declined, else E_FORWARD.
    static std::vector<uint8_t> prepare_error(uint64_t id, bool declined, const std::string & why);
    void   run_stage();
    void   run_forward();
    void   forward_and_reply(prepared & p);
    void   post(finished_reply r);

    engine &                          eng_;
    const int                         input_size_;
    const size_t                      pixel_count_;
    const bool                        overlap_;
    frame_pool &                      pool_;
    std::function<void()>             wake_;
    preprocessor                      prep_;  // used by one thread only: the stage thread, or the forward thread
    std::unique_ptr<uint8_t[]>        decoded_;  // the decoded file, used by that same thread only
    size_t                            decoded_bytes_ = 0;
    std::vector<std::vector<float>>   inputs_;  // two slots with overlap, else one
    output_buffers                    outputs_;  // the engine's outputs, filled by every forward

    std::mutex                  mu_;
    std::condition_variable     stage_cv_;    // the stage thread: a job and a free slot
    std::condition_variable     forward_cv_;  // the forward thread: a prepared input (or, without overlap, a job)
    std::deque<infer_job>       queue_;
    std::deque<prepared>        ready_;
    std::vector<bool>           slot_free_;
    bool                        stage_busy_   = false;
    job_key                     stage_job_    = {0, 0};
    cancel                      stage_cancel_ = cancel::none;
    bool                        forward_busy_ = false;
    std::vector<finished_reply> done_;
    bool                        quit_ = false;
    std::thread                 stage_thread_;
    std::thread                 forward_thread_;
};

}  // namespace rfdetr
