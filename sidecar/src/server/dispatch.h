// What each request op does: decode one payload, answer ping and shutdown, check an infer's sizes against
// the engine and the protocol's limits, and hand it to the pipeline.
#pragma once

#include "engines/registry.h"
#include "protocol/protocol.h"
#include "server/pipeline.h"
#include "server/shm.h"

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace rfdetr {

// The hello frame every connection gets first: the loaded engine's facts, and its registry row's precisions
// and host cores.
std::vector<uint8_t> hello_frame(const engine & eng, const engine_entry & entry, int input_size);

class dispatcher {
  public:
    using send_fn = std::function<void(uint64_t conn_serial, const std::vector<uint8_t> & frame)>;

    // `send` queues a frame for a connection; `begin_stop` starts the clean stop (the shutdown op); `shm`
    // is where shm_attach creates slot files (its path "" when shared memory is unavailable).
    dispatcher(pipeline & pipe, int input_size, const shm_dir & shm, send_fn send, std::function<void()> begin_stop);

    // Handles one complete payload from connection `serial`, whose slot files (after shm_attach) are
    // `slots`. Returns the E_FRAME text when the frame is malformed (the connection must close), else "".
    std::string handle(uint64_t serial, std::unique_ptr<shm_slots> & slots, frame_bytes payload, bool stopping);

  private:
    void reply_error(uint64_t serial, uint64_t id, wire_error code, const std::string & text);
    void infer(uint64_t serial, shm_slots * slots, const message & req, frame_bytes payload, bool stopping);
    void shm_attach(uint64_t serial, uint64_t id, std::unique_ptr<shm_slots> & slots);

    pipeline &            pipe_;
    int                   input_size_;
    const shm_dir &       shm_;
    send_fn               send_;
    std::function<void()> begin_stop_;
};

}  // namespace rfdetr
