// A fixed pool of worker threads created once at engine load: parallel_for hands out task indices
// [0, n) dynamically to the caller thread and the workers, and returns when all are done. The engine's
// only threading model: BLAS runs single-threaded inside these tasks (see README.md, "Threads").
// Waiting spins for up to k_spin_us before sleeping: a forward runs ~150 parallel regions, and on a busy
// machine a thread woken from a futex waits for a scheduler slot each time (measured: 2 threads took
// 2.8 s per forward against 1.65 s for 1 thread with a sleep-only pool).
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <thread>
#include <vector>

namespace rfdetr {

class thread_pool {
  public:
    explicit thread_pool(int n_threads);
    ~thread_pool();
    thread_pool(const thread_pool &)             = delete;
    thread_pool & operator=(const thread_pool &) = delete;

    int size() const { return n_threads_; }

    // Calls f(task, thread) for every task in [0, n_tasks); thread is in [0, size()). No allocation.
    template <class F> void parallel_for(int n_tasks, F && f) {
        auto trampoline = [](void * ctx, int task, int thread) { (*static_cast<F *>(ctx))(task, thread); };
        run(n_tasks, trampoline, &f);
    }

  private:
    using task_fn = void (*)(void * ctx, int task, int thread);
    void run(int n_tasks, task_fn fn, void * ctx);
    void worker_main(int thread);
    void drain(int thread);

    static constexpr int k_spin_us = 2000;

    int                      n_threads_;
    std::vector<std::thread> workers_;
    std::mutex               mutex_;
    std::condition_variable  wake_;
    std::condition_variable  done_cv_;
    std::atomic<uint64_t>    generation_{0};
    std::atomic<bool>        stop_{false};
    int                      sleepers_ = 0;  // workers blocked on wake_ (guarded by mutex_)
    task_fn                  fn_       = nullptr;
    void *                   ctx_      = nullptr;
    int                      n_tasks_  = 0;
    std::atomic<int>         next_{0};
    std::atomic<int>         active_workers_{0};
};

// Physical cores of this machine (distinct (package, core id) pairs in sysfs); falls back to
// hardware_concurrency when sysfs is unreadable.
int physical_core_count();

}  // namespace rfdetr
