#include "engines/cpu/thread-pool.h"

#include <immintrin.h>

#include <chrono>
#include <fstream>
#include <set>
#include <string>
#include <utility>

namespace rfdetr {

thread_pool::thread_pool(int n_threads) : n_threads_(n_threads < 1 ? 1 : n_threads) {
    for (int t = 1; t < n_threads_; ++t) {
        workers_.emplace_back([this, t] { worker_main(t); });
    }
}

thread_pool::~thread_pool() {
    {
        std::lock_guard<std::mutex> lock(mutex_);
        stop_.store(true);
    }
    wake_.notify_all();
    for (auto & w : workers_) {
        w.join();
    }
}

namespace {
// Spins until pred() holds or k_spin_us passed; true if pred() held.
template <class P> bool spin_until(P pred, int spin_us) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::microseconds(spin_us);
    for (;;) {
        for (int i = 0; i < 64; ++i) {
            if (pred()) return true;
            _mm_pause();
        }
        if (std::chrono::steady_clock::now() >= deadline) return pred();
    }
}
}  // namespace

void thread_pool::drain(int thread) {
    for (;;) {
        const int task = next_.fetch_add(1, std::memory_order_relaxed);
        if (task >= n_tasks_) {
            return;
        }
        fn_(ctx_, task, thread);
    }
}

void thread_pool::run(int n_tasks, task_fn fn, void * ctx) {
    if (n_tasks <= 0) {
        return;
    }
    if (n_threads_ == 1 || n_tasks == 1) {
        for (int i = 0; i < n_tasks; ++i) {
            fn(ctx, i, 0);
        }
        return;
    }
    fn_      = fn;
    ctx_     = ctx;
    n_tasks_ = n_tasks;
    next_.store(0, std::memory_order_relaxed);
    active_workers_.store(n_threads_ - 1, std::memory_order_relaxed);
    bool wake = false;
    {
        std::lock_guard<std::mutex> lock(mutex_);
        generation_.fetch_add(1, std::memory_order_release);
        wake = sleepers_ > 0;
    }
    if (wake) {
        wake_.notify_all();
    }
    drain(0);
    // Wait until every worker has left drain(), so the next run cannot race them.
    auto done = [this] { return active_workers_.load(std::memory_order_acquire) == 0; };
    if (!spin_until(done, k_spin_us)) {
        std::unique_lock<std::mutex> lock(mutex_);
        done_cv_.wait(lock, done);
    }
}

void thread_pool::worker_main(int thread) {
    uint64_t seen = 0;
    for (;;) {
        auto work = [&] { return stop_.load(std::memory_order_acquire) || generation_.load(std::memory_order_acquire) != seen; };
        if (!spin_until(work, k_spin_us)) {
            std::unique_lock<std::mutex> lock(mutex_);
            ++sleepers_;
            wake_.wait(lock, work);
            --sleepers_;
        }
        if (stop_.load(std::memory_order_acquire)) {
            return;
        }
        seen = generation_.load(std::memory_order_acquire);
        drain(thread);
        if (active_workers_.fetch_sub(1, std::memory_order_acq_rel) == 1) {
            std::lock_guard<std::mutex> lock(mutex_);
            done_cv_.notify_one();
        }
    }
}

int physical_core_count() {
    std::set<std::pair<std::string, std::string>> cores;
    for (unsigned cpu = 0; cpu < 4096; ++cpu) {
        const std::string base = "/sys/devices/system/cpu/cpu" + std::to_string(cpu) + "/topology/";
        std::ifstream     pkg(base + "physical_package_id");
        std::ifstream     core(base + "core_id");
        if (!pkg || !core) {
            break;
        }
        std::string p, c;
        pkg >> p;
        core >> c;
        cores.emplace(p, c);
    }
    if (!cores.empty()) {
        return static_cast<int>(cores.size());
    }
    const unsigned n = std::thread::hardware_concurrency();
    return n > 0 ? static_cast<int>(n) : 1;
}

}  // namespace rfdetr
