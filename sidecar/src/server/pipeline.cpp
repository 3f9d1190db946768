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

// The decode buffer is kept between requests up to this size (a 2560x2048 image); a larger one is freed after use.
constexpr size_t k_decoded_keep_bytes = 16u << 20;

}  // namespace

pipeline::pipeline(engine & eng, bool host_cores, int input_size, frame_pool & pool, std::function<void()> wake)
    : eng_(eng),
      input_size_(input_size),
      pixel_count_(static_cast<size_t>(k_input_channels) * input_size * input_size),
      overlap_(!host_cores),
      pool_(pool),
      wake_(std::move(wake)),
      prep_(input_size),
      inputs_(overlap_ ? 2 : 1, std::vector<float>(pixel_count_)),
      outputs_(eng.outputs()),
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

uint8_t * pipeline::decoded_buffer(size_t bytes) {
    if (bytes > decoded_bytes_) {
        decoded_.reset();  // the old one first: the two never coexist
        decoded_bytes_ = 0;
        decoded_.reset(new uint8_t[bytes]);  // not make_unique: that would zero it
        decoded_bytes_ = bytes;
    }
    return decoded_.get();
}

void pipeline::trim_decoded() {
    if (decoded_bytes_ > k_decoded_keep_bytes) {
        decoded_.reset();
        decoded_bytes_ = 0;
    }
}

std::vector<uint8_t> pipeline::prepare_error(uint64_t id, bool declined, const std::string & why) {
    return declined ? error_frame(id, wire_error::WIRE_ERROR_DECODE,
                                  "the sidecar declined to decode the file: " + why +
                                      "; decode it and send it as image")
                    : error_frame(id, wire_error::WIRE_ERROR_FORWARD, "preprocess: " + why);
}

pipeline::prep_times pipeline::prepare(infer_job & j, int slot) {
    float *    dst = inputs_[static_cast<size_t>(slot)].data();
    prep_times t;
    if (j.encoded) {
        struct trim_after {
            pipeline & p;
            ~trim_after() { p.trim_decoded(); }
        } trim{*this};
        const auto t0  = clock_type::now();
        uint8_t *  rgb = decoded_buffer(static_cast<size_t>(j.width) * static_cast<size_t>(j.height) * 3);
        decode_rgb_into(j.format, j.encoded, j.encoded_size, j.width, j.height, rgb);
        t.decode_ms       = ms_since(t0);
        t.decoded         = true;
        const auto t1     = clock_type::now();
        prep_.run(rgb, j.width, j.height, dst);
        t.preprocess_ms = ms_since(t1);
        return t;
    }
    if (j.rgb) {
        const auto t0 = clock_type::now();
        prep_.run(j.rgb, j.width, j.height, dst);
        t.preprocess_ms = ms_since(t0);
        return t;
    }
    std::memcpy(dst, j.pixels, pixel_count_ * sizeof(float));  // the bin may be misaligned
    return t;
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
        prep_times  times;
        std::string err;
        bool        failed = false, declined = false;
        try {
            times = prepare(j, slot);
        } catch (const decode_declined & e) {
            err    = e.what();
            failed = declined = true;
        } catch (const std::exception & e) {
            err    = e.what();
            failed = true;
        }
        pool_.give(std::move(j.payload));  // the request's bytes are no longer needed
        std::unique_lock<std::mutex> lock(mu_);
        stage_busy_ = false;
        if (stage_cancel_ == cancel::none && !failed) {
            ready_.push_back({j.conn_serial, j.id, slot, times, std::move(j.select)});
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
                                            : prepare_error(j.id, declined, err)});
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
                p = std::move(ready_.front());
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
                p = {j.conn_serial, j.id, 0, {}, std::move(j.select)};
                std::string err;
                bool        failed = false, declined = false;
                try {
                    p.times = prepare(j, 0);
                } catch (const decode_declined & e) {
                    err    = e.what();
                    failed = declined = true;
                } catch (const std::exception & e) {
                    err    = e.what();
                    failed = true;
                }
                pool_.give(std::move(j.payload));
                if (failed) {
                    post({j.conn_serial, prepare_error(j.id, declined, err)});
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

void pipeline::forward_and_reply(prepared & p) {
    finished_reply d{p.conn_serial, {}};
    const auto     t0 = clock_type::now();
    try {
        engine_forward(eng_, inputs_[static_cast<size_t>(p.slot)].data(), outputs_, std::move(p.select));
        message m       = make_ok_reply(p.id);
        m.fields       |= WIRE_FIELD_OUTPUTS | WIRE_FIELD_PREPROCESS_MS | WIRE_FIELD_FORWARD_MS;
        m.forward_ms    = ms_since(t0);
        m.preprocess_ms = p.times.preprocess_ms;
        if (p.times.decoded) {
            m.fields    |= WIRE_FIELD_DECODE_MS;
            m.decode_ms  = p.times.decode_ms;
        }
        for (size_t i = 0; i < outputs_.specs().size(); i++) {  // the hello's order
            const auto & v = outputs_.values(i);
            m.outputs.push_back(
                {outputs_.specs()[i].name, {reinterpret_cast<const uint8_t *>(v.data()), v.size() * sizeof(float)}});
        }
        if (outputs_.has_selected()) {  // the query of each row a selected output carries
            m.fields |= WIRE_FIELD_ROWS;
            const auto & rows = outputs_.rows();
            for (const auto & s : outputs_.specs()) {
                if (s.selected) {
                    m.rows.push_back({s.name, std::vector<uint64_t>(rows.begin(), rows.end())});
                }
            }
        }
        encode_frame(m, d.frame);
    } catch (const std::exception & e) {
        std::fprintf(stderr, "pipeline: forward of request %llu failed: %s\n", static_cast<unsigned long long>(p.id),
                     e.what());
        d.frame = error_frame(p.id, wire_error::WIRE_ERROR_FORWARD, std::string("forward: ") + e.what());
    }
    post(std::move(d));
}

}  // namespace rfdetr
