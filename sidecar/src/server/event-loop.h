// The poll() thread: owns every socket (accept, read, write), the stop signals, the systemd watchdog and
// the partial-frame timeout; hands complete frames to the dispatcher and writes the pipeline's replies.
// Pings are answered here at once, so they are answered while a forward runs.
#pragma once

#include "engines/registry.h"
#include "server/connection.h"
#include "server/dispatch.h"
#include "server/listen.h"
#include "server/pipeline.h"

#include <chrono>
#include <cstdint>
#include <map>
#include <vector>

namespace rfdetr {

class event_loop {
  public:
    // `entry`: the engine's registry row (its precisions and host cores, for the hello and the pipeline).
    event_loop(engine & eng, const engine_entry & entry, int input_size, listener & lst, int signal_fd,
               int frame_timeout_ms);
    ~event_loop();

    // Serves until a stop (signal or shutdown op) has finished the forward in progress and flushed replies.
    void run();

  private:
    using clock_type = std::chrono::steady_clock;

    void begin_stop();
    void accept_all();
    void sweep();
    void drain_done();
    void send_frame(uint64_t serial, const std::vector<uint8_t> & frame);
    void expire_stalled_frames();
    int  poll_timeout_ms(clock_type::time_point next_watchdog, bool watchdog) const;
    bool any_output_pending() const;

    listener &                     lst_;
    int                            signal_fd_;
    int                            wake_fd_;
    int                            frame_timeout_ms_;
    shm_dir                        shm_;
    frame_pool                     pool_;
    pipeline                       pipe_;
    dispatcher                     dispatch_;
    std::vector<uint8_t>           hello_frame_;
    std::map<uint64_t, connection> conns_;
    uint64_t                       next_serial_ = 0;
    bool                           stopping_    = false;
    clock_type::time_point         stop_deadline_{};
};

}  // namespace rfdetr
