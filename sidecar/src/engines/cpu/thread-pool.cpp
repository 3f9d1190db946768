#include "engines/cpu/thread-pool.h"

#include <immintrin.h>
#include <sched.h>

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

void thread_pool::drain(uint32_t gen, int thread) {
    const region & r       = regions_[gen & 1];
    const task_fn  fn      = r.fn.load(std::memory_order_relaxed);
    void * const   ctx     = r.ctx.load(std::memory_order_relaxed);
    const int      n_tasks = r.n_tasks.load(std::memory_order_relaxed);
    uint64_t       cur     = claim_.load(std::memory_order_acquire);
    for (;;) {
        if (static_cast<uint32_t>(cur >> 32) != gen || static_cast<int>(cur & 0xffffffffu) >= n_tasks) {
            return;
        }
        if (!claim_.compare_exchange_weak(cur, cur + 1, std::memory_order_acq_rel, std::memory_order_acquire)) {
            continue;
        }
        fn(ctx, static_cast<int>(cur & 0xffffffffu), thread);
        if (finished_.fetch_add(1, std::memory_order_acq_rel) + 1 == n_tasks) {
            std::lock_guard<std::mutex> lock(mutex_);
            if (main_sleeping_) {
                done_cv_.notify_one();
            }
        }
        cur = claim_.load(std::memory_order_acquire);
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
    // The previous region has finished all its tasks, so no worker can claim in it any more; a worker
    // still holding its descriptor fails its next claim on the generation check.
    const uint32_t gen = static_cast<uint32_t>(claim_.load(std::memory_order_relaxed) >> 32) + 1;
    region &       r   = regions_[gen & 1];
    r.fn.store(fn, std::memory_order_relaxed);
    r.ctx.store(ctx, std::memory_order_relaxed);
    r.n_tasks.store(n_tasks, std::memory_order_relaxed);
    finished_.store(0, std::memory_order_relaxed);
    bool wake = false;
    {
        std::lock_guard<std::mutex> lock(mutex_);
        claim_.store(static_cast<uint64_t>(gen) << 32, std::memory_order_release);
        wake = sleepers_ > 0;
    }
    if (wake) {
        wake_.notify_all();
    }
    drain(gen, 0);
    auto done = [&] { return finished_.load(std::memory_order_acquire) == n_tasks; };
    if (!spin_until(done, k_spin_us)) {
        std::unique_lock<std::mutex> lock(mutex_);
        main_sleeping_ = true;
        done_cv_.wait(lock, done);
        main_sleeping_ = false;
    }
}

void thread_pool::worker_main(int thread) {
    uint32_t seen = 0;
    for (;;) {
        auto work = [&] {
            return stop_.load(std::memory_order_acquire) ||
                   static_cast<uint32_t>(claim_.load(std::memory_order_acquire) >> 32) != seen;
        };
        if (!spin_until(work, k_spin_us)) {
            std::unique_lock<std::mutex> lock(mutex_);
            ++sleepers_;
            wake_.wait(lock, work);
            --sleepers_;
        }
        if (stop_.load(std::memory_order_acquire)) {
            return;
        }
        seen = static_cast<uint32_t>(claim_.load(std::memory_order_acquire) >> 32);
        drain(seen, thread);
    }
}

int physical_core_count() {
    // Physical cores among the CPUs this process may run on (a container's cpuset, taskset), so the
    // default never oversubscribes what the scheduler will actually give us.
    cpu_set_t mask;
    CPU_ZERO(&mask);
    const bool have_mask = sched_getaffinity(0, sizeof(mask), &mask) == 0;
    std::set<std::pair<std::string, std::string>> cores;
    int                                            allowed = 0;
    for (unsigned cpu = 0; cpu < CPU_SETSIZE; ++cpu) {
        if (have_mask && !CPU_ISSET(cpu, &mask)) {
            continue;
        }
        ++allowed;
        const std::string base = "/sys/devices/system/cpu/cpu" + std::to_string(cpu) + "/topology/";
        std::ifstream     pkg(base + "physical_package_id");
        std::ifstream     core(base + "core_id");
        if (!pkg || !core) {
            continue;
        }
        std::string p, c;
        pkg >> p;
        core >> c;
        cores.emplace(p, c);
    }
    if (!cores.empty()) {
        return static_cast<int>(cores.size());
    }
    if (have_mask && allowed > 0) {
        return allowed;
    }
    const unsigned n = std::thread::hardware_concurrency();
    return n > 0 ? static_cast<int>(n) : 1;
}

}  // namespace rfdetr
