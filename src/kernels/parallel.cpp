// The kernel thread pool behind parallel.h. One job at a time: the caller publishes it by
// bumping `generation_`, runs thread 0's share, then waits for the workers' count to drain.
// Workers spin on `generation_` for kSpin after their last job, then sleep on it (futex);
// the caller only pays for a wake-up system call when some worker is asleep.
#include "kernels/parallel.h"

#include <immintrin.h>
#include <omp.h>
#include <sched.h>

#include <chrono>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

namespace mlaserve::kernels {
namespace {

// Long enough to bridge the gaps between the ops of a step and, usually, between decode steps
// (logits, sampling, scheduling), so that a step's first GEMV does not wait for a wake-up;
// short enough that an idle server stops spinning at once.
constexpr auto kSpin = std::chrono::microseconds(2000);

// A gap this long between two checks of a spinning thread means it lost its core (preempted,
// or its yield ran another thread): other work wants the cores. The pool's threads then sleep
// right after each job for kBackOff, because spinning on a contended machine only burns this
// process's share of the CPU (decode ran ~20 % slower than with sleeping threads at load 3.5).
constexpr auto kPreempted = std::chrono::microseconds(300);
constexpr auto kBackOff = std::chrono::milliseconds(200);

using Clock = std::chrono::steady_clock;

// One step of a spin-wait: pauses first; from the 64th step on, yields the core, because on a
// shared machine the thread being waited for may need this very core to make progress.
void pause_or_yield(int step) {
  if (step < 64) {
    for (int i = 0; i < 16; ++i) _mm_pause();
  } else {
    sched_yield();
  }
}

// Set while a thread runs a pool task, so that a parallel loop inside a task runs inline.
thread_local bool t_in_task = false;

class ThreadPool {
 public:
  ~ThreadPool() {
    stop_.store(true);
    generation_.fetch_add(1);
    generation_.notify_all();
    for (std::thread& t : workers_) t.join();
  }

  // Returns false when the pool is busy; the caller then runs the task itself.
  bool try_run(int threads, void (*task)(void*, int, int), void* context) {
    if (t_in_task) return false;
    std::unique_lock lock(owner_, std::try_to_lock);
    if (!lock.owns_lock()) return false;
    while (static_cast<int>(workers_.size()) < threads - 1) start_worker();
    job_ = {task, context, threads};
    pending_.store(static_cast<int>(workers_.size()), std::memory_order_relaxed);
    park_.store(false, std::memory_order_relaxed);
    generation_.fetch_add(1);  // seq_cst: ordered against the workers' sleepers_ increment
    if (sleepers_.load() > 0) generation_.notify_all();
    t_in_task = true;
    task(context, 0, threads);
    t_in_task = false;
    for (int i = 1; pending_.load(std::memory_order_acquire) > 0; ++i) pause_or_yield(i);
    return true;
  }

  void park() { park_.store(true, std::memory_order_relaxed); }

  bool awake() const {
    return !park_.load(std::memory_order_relaxed) &&
           sleepers_.load(std::memory_order_relaxed) == 0 && !contended(Clock::now());
  }

 private:
  struct Job {
    void (*task)(void*, int, int);
    void* context;
    int threads;
  };

  void start_worker() {
    const int index = static_cast<int>(workers_.size()) + 1;
    const uint32_t seen = generation_.load();
    workers_.emplace_back([this, index, seen] { work(index, seen); });
  }

  void work(int index, uint32_t seen) {
    for (;;) {
      seen = wait_for_job(seen);
      if (stop_.load()) return;
      const Job job = job_;  // published before generation_ changed
      if (index < job.threads) {
        t_in_task = true;
        job.task(job.context, index, job.threads);
        t_in_task = false;
      }
      pending_.fetch_sub(1, std::memory_order_release);
    }
  }

  bool contended(Clock::time_point now) const {
    return now.time_since_epoch().count() < contended_until_.load(std::memory_order_relaxed);
  }

  // Spins until generation_ moves past `seen`, for at most kSpin or until park() or a sign of
  // contention, then sleeps.
  uint32_t wait_for_job(uint32_t seen) {
    auto last = Clock::now();
    const auto deadline = last + kSpin;
    for (int i = 1; !contended(last); ++i) {
      const uint32_t now = generation_.load(std::memory_order_acquire);
      if (now != seen) return now;
      pause_or_yield(i);
      if (i % 16 != 0) continue;
      const auto time = Clock::now();
      if (time - last > kPreempted) {
        contended_until_.store((time + kBackOff).time_since_epoch().count(),
                               std::memory_order_relaxed);
      }
      if (park_.load(std::memory_order_relaxed) || time > deadline) break;
      last = time;
    }
    sleepers_.fetch_add(1);  // seq_cst: the caller either sees this or we see its new job
    uint32_t now = generation_.load();
    while (now == seen) {
      generation_.wait(seen);
      now = generation_.load();
    }
    sleepers_.fetch_sub(1);
    return now;
  }

  std::mutex owner_;  // held by the one caller whose job runs
  std::vector<std::thread> workers_;
  Job job_{};
  std::atomic<uint32_t> generation_{0};
  std::atomic<int> pending_{0};  // workers that have not yet finished the current job
  std::atomic<int> sleepers_{0};
  std::atomic<bool> park_{false};
  std::atomic<bool> stop_{false};
  std::atomic<Clock::rep> contended_until_{0};  // Clock ticks; no spinning before this time
};

ThreadPool& pool() {
  static ThreadPool instance;
  return instance;
}

}  // namespace

int parallel_threads() {
  return omp_get_max_threads();
}

void run_on_threads(int threads, void (*task)(void*, int, int), void* context) {
  if (threads > 1 && pool().try_run(threads, task, context)) return;
  for (int t = 0; t < threads; ++t) task(context, t, threads);
}

void park_threads() {
  pool().park();
}

bool parallel_threads_awake() {
  return pool().awake();
}

}  // namespace mlaserve::kernels
