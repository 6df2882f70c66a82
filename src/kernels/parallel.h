// Splitting work across OpenMP threads without paying for a parallel region when the work is
// too small: on this VM every region wakes its threads through futex system calls, which
// costs microseconds, more than a small op itself.
#pragma once

#include <omp.h>

#include <algorithm>
#include <cstdint>

namespace mlaserve::kernels {

// Calls body(begin, end) on contiguous ranges covering [0, count): one range per OpenMP thread
// when `parallel`, else the whole range inline on the calling thread.
template <typename Body>
void for_ranges(int64_t count, bool parallel, Body body) {
  if (!parallel || count < 2 || omp_get_max_threads() == 1) {
    body(int64_t{0}, count);
    return;
  }
#pragma omp parallel
  {
    const int64_t threads = omp_get_num_threads(), t = omp_get_thread_num();
    const int64_t begin = count * t / threads, end = count * (t + 1) / threads;
    if (begin < end) body(begin, end);
  }
}

// Calls body(i) for every i in [0, count), handing items to threads one at a time (for items
// of unequal cost) when `parallel`, else in order on the calling thread.
template <typename Body>
void for_each_item(int64_t count, bool parallel, Body body) {
  if (!parallel || count < 2 || omp_get_max_threads() == 1) {
    for (int64_t i = 0; i < count; ++i) body(i);
    return;
  }
#pragma omp parallel for schedule(dynamic, 1)
  for (int64_t i = 0; i < count; ++i) body(i);
}

}  // namespace mlaserve::kernels
