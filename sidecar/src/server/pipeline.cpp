#include "server/pipeline.h"

#include "protocol/protocol.h"

#include <chrono>
#include <cstdio>
#include <cstring>

namespace rfdetr {

namespace {

using clock_type = std::chrono::steady_clock;

double ms_since(clock_type::time_point t0) {
    return std::chrono::duration<double, std::milli>(clock_type::now() - t0).count();
}

std::vector<uint8_t> error_frame(uint64_t id, wire_error code, const std::string & text) {
    std::vector<uint8_t> f;
    encode_frame(make_error_reply(id, code, text), f);
    return f;
}

}  // namespace

pipeline::pipeline(engine & eng, int input_size, frame_pool & pool, std::function<void()> wake)
    : eng_(eng),
      input_size_(input_size),
      pixel_count_(static_cast<size_t>(k_input_channels) * input_size * input_size),
      overlap_(!eng.forward_uses_host_cores()),
      pool_(pool),
      wake_(std::move(wake)),
      prep_(input_size),
      inputs_(overlap_ ? 2 : 1, std::vector<float>(pixel_count_)),
      logits_(static_cast<size_t>(eng.num_queries()) * eng.num_classes()),
      boxes_(static_cast<size_t>(eng.num_queries()) * 4),
      slot_free_(inputs_.size(), true) {
    forward_thread_ = std::thread([this] { run_forward(); });
    if (overlap_) {
        stage_thread_ = std::thread([this] { run_stage(); });
    }
}

pipeline::~pipeline() {
    stop();
}

void pipeline::submit(infer_job j) {
    std::lock_guard<std::mutex> lock(mu_);
    queue_.push_back(std::move(j));
    (overlap_ ? stage_cv_ : forward_cv_).notify_one();
}

std::vector<job_key> pipeline::take_queued(uint64_t serial) {
    std::lock_guard<std::mutex> lock(mu_);
    std::vector<job_key>        out;
    for (auto it = queue_.begin(); it != queue_.end();) {
        if (serial == 0 || it->conn_serial == serial) {
            out.push_back({it->conn_serial, it->id});
            it = queue_.erase(it);
        } else {
            ++it;
        }
    }
    for (auto it = ready_.begin(); it != ready_.end();) {
        if (serial == 0 || it->conn_serial == serial) {
            out.push_back({it->conn_serial, it->id});
            slot_free_[it->slot] = true;
            it                   = ready_.erase(it);
            stage_cv_.notify_one();
        } else {
            ++it;
        }
    }
    if (stage_busy_ && stage_cancel_ == cancel::none && (serial == 0 || stage_job_.conn_serial == serial)) {
        stage_cancel_ = serial == 0 ? cancel::stopping : cancel::dropped;
    }
    return out;
}

std::vector<finished_reply> pipeline::take_done() {
    std::lock_guard<std::mutex> lock(mu_);
    std::vector<finished_reply> out(std::make_move_iterator(done_.begin()), std::make_move_iterator(done_.end()));
    done_.clear();
    return out;
}

bool pipeline::idle() {
    std::lock_guard<std::mutex> lock(mu_);
    return queue_.empty() && ready_.empty() && !stage_busy_ && !forward_busy_;
}

void pipeline::stop() {
    {
        std::lock_guard<std::mutex> lock(mu_);
        quit_ = true;
        stage_cv_.notify_all();
        forward_cv_.notify_all();
    }
    if (stage_thread_.joinable()) {
        stage_thread_.join();
    }
    if (forward_thread_.joinable()) {
        forward_thread_.join();
    }
}

double pipeline::prepare(infer_job & j, int slot) {
    float * dst = inputs_[static_cast<size_t>(slot)].data();
    if (j.rgb) {
        const auto t0 = clock_type::now();
        prep_.run(j.rgb, j.width, j.height, dst);
        return ms_since(t0);
    }
    std::memcpy(dst, j.pixels, pixel_count_ * sizeof(float));  // the bin may be misaligned
    return 0.0;
}

void pipeline::post(finished_reply r) {
    {
        std::lock_guard<std::mutex> lock(mu_);
        done_.push_back(std::move(r));
    }
    wake_();
}

void pipeline::run_stage() {
    for (;;) {
        infer_job j;
        int       slot = -1;
        {
            std::unique_lock<std::mutex> lock(mu_);
            stage_cv_.wait(lock, [this] {
                if (quit_) {
                    return true;
                }
                if (queue_.empty()) {
                    return false;
                }
                for (bool f : slot_free_) {
                    if (f) {
                        return true;
                    }
                }
                return false;
            });
            if (quit_) {
                return;
            }
            for (size_t i = 0; i < slot_free_.size() && slot < 0; i++) {
                if (slot_free_[i]) {
                    slot = static_cast<int>(i);
                }
            }
            slot_free_[static_cast<size_t>(slot)] = false;
            j                                     = std::move(queue_.front());
            queue_.pop_front();
            stage_busy_   = true;
            stage_job_    = {j.conn_serial, j.id};
            stage_cancel_ = cancel::none;
        }
        double      ms = 0.0;
        std::string err;
        try {
            ms = prepare(j, slot);
        } catch (const std::exception & e) {
            err = e.what();
        }
        pool_.give(std::move(j.payload));  // the request's bytes are no longer needed
        std::unique_lock<std::mutex> lock(mu_);
        stage_busy_ = false;
        if (stage_cancel_ == cancel::none && err.empty()) {
            ready_.push_back({j.conn_serial, j.id, slot, ms});
            forward_cv_.notify_one();
            continue;
        }
        slot_free_[static_cast<size_t>(slot)] = true;
        if (stage_cancel_ == cancel::dropped) {
            continue;  // its client left
        }
        done_.push_back({j.conn_serial, stage_cancel_ == cancel::stopping
                                            ? error_frame(j.id, wire_error::WIRE_ERROR_STOPPING,
                                                          "the sidecar is shutting down; the request was not run: "
                                                          "retry on a new sidecar")
                                            : error_frame(j.id, wire_error::WIRE_ERROR_FORWARD, "preprocess: " + err)});
        lock.unlock();
        wake_();
    }
}

void pipeline::run_forward() {
    for (;;) {
        prepared p{};
        {
            std::unique_lock<std::mutex> lock(mu_);
            if (overlap_) {
                forward_cv_.wait(lock, [this] { return quit_ || !ready_.empty(); });
                if (quit_) {
                    return;
                }
                p = ready_.front();
                ready_.pop_front();
                forward_busy_ = true;
            } else {
                forward_cv_.wait(lock, [this] { return quit_ || !queue_.empty(); });
                if (quit_) {
                    return;
                }
                infer_job j = std::move(queue_.front());
                queue_.pop_front();
                forward_busy_ = true;
                lock.unlock();
                p = {j.conn_serial, j.id, 0, 0.0};
                try {
                    p.preprocess_ms = prepare(j, 0);
                    pool_.give(std::move(j.payload));
                } catch (const std::exception & e) {
                    post({j.conn_serial, error_frame(j.id, wire_error::WIRE_ERROR_FORWARD, std::string("preprocess: ") + e.what())});
                    lock.lock();
                    forward_busy_ = false;
                    continue;
                }
            }
        }
        forward_and_reply(p);
        std::lock_guard<std::mutex> lock(mu_);
        slot_free_[static_cast<size_t>(p.slot)] = true;
        forward_busy_                           = false;
        stage_cv_.notify_one();
    }
}

void pipeline::forward_and_reply(const prepared & p) {
    finished_reply d{p.conn_serial, {}};
    const auto     t0 = clock_type::now();
    try {
        eng_.forward(inputs_[static_cast<size_t>(p.slot)].data(), logits_.data(), boxes_.data());
        message m       = make_ok_reply(p.id);
        m.fields       |= WIRE_FIELD_LOGITS | WIRE_FIELD_PRED_BOXES | WIRE_FIELD_PREPROCESS_MS | WIRE_FIELD_FORWARD_MS;
        m.forward_ms    = ms_since(t0);
        m.preprocess_ms = p.preprocess_ms;
        m.logits        = {reinterpret_cast<const uint8_t *>(logits_.data()), logits_.size() * sizeof(float)};
        m.pred_boxes    = {reinterpret_cast<const uint8_t *>(boxes_.data()), boxes_.size() * sizeof(float)};
        encode_frame(m, d.frame);
    } catch (const std::exception & e) {
        std::fprintf(stderr, "pipeline: forward of request %llu failed: %s\n", static_cast<unsigned long long>(p.id),
                     e.what());
        d.frame = error_frame(p.id, wire_error::WIRE_ERROR_FORWARD, std::string("forward: ") + e.what());
    }
    post(std::move(d));
}

}  // namespace rfdetr
