#include "engines/cpu/thread-pool.h"

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
        stop_ = true;
    }
    wake_.notify_all();
    for (auto & w : workers_) {
        w.join();
    }
}

void thread_pool::drain(int thread) {
    for (;;) {
        const int task = next_.fetch_add(1, std::memory_order_relaxed);
        if (task >= n_tasks_) {
            return;
        }
        fn_(ctx_, task, thread);
        finished_.fetch_add(1, std::memory_order_release);
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
    {
        std::lock_guard<std::mutex> lock(mutex_);
        fn_      = fn;
        ctx_     = ctx;
        n_tasks_ = n_tasks;
        next_.store(0, std::memory_order_relaxed);
        finished_.store(0, std::memory_order_relaxed);
        active_workers_ = n_threads_ - 1;
        ++generation_;
    }
    wake_.notify_all();
    drain(0);
    // Wait for the tasks and for every worker to have left drain(), so the next run cannot race them.
    std::unique_lock<std::mutex> lock(mutex_);
    done_cv_.wait(lock, [this] { return active_workers_ == 0; });
}

void thread_pool::worker_main(int thread) {
    uint64_t seen = 0;
    for (;;) {
        {
            std::unique_lock<std::mutex> lock(mutex_);
            wake_.wait(lock, [&] { return stop_ || generation_ != seen; });
            if (stop_) {
                return;
            }
            seen = generation_;
        }
        drain(thread);
        bool last = false;
        {
            std::lock_guard<std::mutex> lock(mutex_);
            last = --active_workers_ == 0;
        }
        if (last) {
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
