// Splitting work across the kernels' threads. A decode step runs ~150 small parallel ops, so
// what it costs to start one decides the step time: on this VM an OpenMP region with passive
// waiting wakes its threads through futex calls and inter-processor interrupts, ~10-30 µs per
// region, several milliseconds per step. The kernels therefore run on their own pool, whose
// threads spin for a short while after each op (so the next op starts in well under a
// microsecond) and then sleep, so an idle process takes no CPU from its neighbours.
#pragma once

#include <atomic>
#include <cstdint>

namespace mlaserve::kernels {

// How many threads the parallel loops use: OpenMP's setting (OMP_NUM_THREADS,
// omp_set_num_threads), so that the kernels and oneDNN's OpenMP team agree.
int parallel_threads();

// Calls task(context, thread, threads) for thread = 0 .. threads-1, one per pool thread (the
// caller is thread 0), and returns when all have returned. When the pool is busy (a call from
// inside a task, or from a second thread) every call runs in turn on the calling thread.
void run_on_threads(int threads, void (*task)(void*, int, int), void* context);

// Whether the pool's threads are spinning, i.e. a parallel loop now starts in about a
// microsecond; a sleeping thread takes tens of microseconds to wake on this VM, which only
// pays for larger work. A hint: the answer may change at any moment.
bool parallel_threads_awake();

// Sends the pool's spinning threads to sleep now: called before oneDNN's OpenMP team takes the
// cores, whose threads would otherwise share them with spinners.
void park_threads();

// Calls body(thread, threads) on parallel_threads() threads, or once as (0, 1) when not
// `parallel`.
template <typename Body>
void on_threads(bool parallel, Body body) {
  const int threads = parallel ? parallel_threads() : 1;
  if (threads == 1) {
    body(0, 1);
    return;
  }
  run_on_threads(
      threads,
      [](void* context, int thread, int count) { (*static_cast<Body*>(context))(thread, count); },
      &body);
}

// Calls body(begin, end) on contiguous ranges covering [0, count): one range per thread when
// `parallel`, else the whole range inline on the calling thread.
template <typename Body>
void for_ranges(int64_t count, bool parallel, Body body) {
  on_threads(parallel && count >= 2, [&](int thread, int threads) {
    const int64_t begin = count * thread / threads, end = count * (thread + 1) / threads;
    if (begin < end) body(begin, end);
  });
}

// Calls body(i) for every i in [0, count), handing items to threads one at a time (for items
// of unequal cost) when `parallel`, else in order on the calling thread.
template <typename Body>
void for_each_item(int64_t count, bool parallel, Body body) {
  std::atomic<int64_t> next{0};
  on_threads(parallel && count >= 2, [&](int, int) {
    for (int64_t i = next.fetch_add(1, std::memory_order_relaxed); i < count;
         i = next.fetch_add(1, std::memory_order_relaxed)) {
      body(i);
    }
  });
}

}  // namespace mlaserve::kernels
