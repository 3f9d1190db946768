// A fixed pool of worker threads created once at engine load: parallel_for hands out task indices
// [0, n) dynamically to the caller thread and the workers, and returns when every task has finished.
// The engine's only threading model: BLAS runs single-threaded inside these tasks (README.md, "Threads").
// Workers are not required to take part: a region ends when its tasks are done, so a worker the
// scheduler has not run yet (a busy machine) delays nothing; the caller takes its share. A task index is
// claimed with one compare-and-swap on (region, next index), so a late worker can never run a task of a
// newer region with an older region's function. Waiting spins for up to k_spin_us before sleeping.
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

    // Calls f(task, thread) for every task in [0, n_tasks); thread is in [0, size()) and no two concurrent
    // calls share one. Not reentrant; one caller at a time. No allocation.
    template <class F> void parallel_for(int n_tasks, F && f) {
        auto trampoline = [](void * ctx, int task, int thread) { (*static_cast<F *>(ctx))(task, thread); };
        run(n_tasks, trampoline, &f);
    }

  private:
    using task_fn = void (*)(void * ctx, int task, int thread);
    struct region {
        std::atomic<task_fn> fn{nullptr};
        std::atomic<void *>  ctx{nullptr};
        std::atomic<int>     n_tasks{0};
    };
    static constexpr int k_spin_us = 500;

    void run(int n_tasks, task_fn fn, void * ctx);
    void worker_main(int thread);
    void drain(uint32_t gen, int thread);

    int                      n_threads_;
    std::vector<std::thread> workers_;
    std::mutex               mutex_;
    std::condition_variable  wake_;
    std::condition_variable  done_cv_;
    // (region generation << 32) | next task index: claims are CASes on this word.
    std::atomic<uint64_t>    claim_{0};
    region                   regions_[2];  // indexed by generation & 1
    std::atomic<int>         finished_{0};
    std::atomic<bool>        stop_{false};
    int                      sleepers_      = 0;  // workers blocked on wake_ (guarded by mutex_)
    bool                     main_sleeping_ = false;
};

// Physical cores among the CPUs this process may run on (distinct (package, core id) pairs in sysfs over
// the affinity mask); falls back to the allowed CPU count, then hardware_concurrency.
int physical_core_count();

}  // namespace rfdetr
