// Storage for a weight's values. Buffers of 2 MB or more start on a 2 MB boundary and are
// advised to the kernel as transparent huge pages: a decode step streams every weight once, and
// with 4 KB pages that is a TLB miss every 4 KB and, at load, a page fault every 4 KB (page
// faults took two fifths of the bench model's load). Elements are left uninitialised by
// resize(): Weight's constructor zeroes them on the kernels' threads, so that the first touch
// of each page, where the kernel clears it, is spread over the cores.
#pragma once

#include <sys/mman.h>

#include <algorithm>
#include <cstdlib>
#include <new>
#include <vector>

namespace mlaserve::kernels {

constexpr size_t kHugePage = size_t{2} << 20;

// `bytes` rounded up to whole huge pages, 2 MB-aligned and advised as transparent huge pages
// (advice only: without THP the pages stay 4 KB). Freed with std::free.
inline void* allocate_huge_pages(size_t bytes) {
  const size_t rounded = (bytes + kHugePage - 1) / kHugePage * kHugePage;
  void* p = std::aligned_alloc(kHugePage, rounded);
  if (p == nullptr) throw std::bad_alloc();
  madvise(p, rounded, MADV_HUGEPAGE);
  return p;
}

template <class T>
struct WeightAllocator {
  using value_type = T;

  WeightAllocator() = default;
  template <class U>
  explicit WeightAllocator(const WeightAllocator<U>&) {}

  T* allocate(size_t n) {
    const size_t bytes = n * sizeof(T);
    if (bytes < kHugePage) return static_cast<T*>(::operator new(bytes));
    return static_cast<T*>(allocate_huge_pages(bytes));
  }
  void deallocate(T* p, size_t n) {
    if (n * sizeof(T) < kHugePage) {
      ::operator delete(p);
    } else {
      std::free(p);
    }
  }
  template <class U>
  void construct(U* p) {
    ::new (static_cast<void*>(p)) U;  // default-initialised: no zeroing pass
  }
  template <class U, class... Args>
  void construct(U* p, Args&&... args) {
    ::new (static_cast<void*>(p)) U(std::forward<Args>(args)...);
  }
  template <class U>
  bool operator==(const WeightAllocator<U>&) const {
    return true;
  }
};

template <class T>
using WeightBuffer = std::vector<T, WeightAllocator<T>>;

// A scratch kept across calls (a thread's, like core/scratch.h's take) on huge pages: its first n
// elements, grown when too small and to one huge page at least. A huge page is physically
// contiguous, so a block meant to stay in L2 spreads over every L2 set whatever 4 KB pages the
// process was given (some processes' pages crowd sets; measured on the quantized GEMMs).
template <class T>
T* take_huge(WeightBuffer<T>& buffer, size_t n) {
  if (buffer.size() < n) buffer.resize(std::max(n, kHugePage / sizeof(T)));
  return buffer.data();
}

}  // namespace mlaserve::kernels
