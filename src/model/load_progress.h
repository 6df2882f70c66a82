// Progress of loading a model's layers. On a terminal, a line on stderr redrawn after each layer
// (layers done, MB copied, MB/s, time left); otherwise nothing until done(), which logs one line.
// After each layer it also checks that the layers still to come fit: at the size of those loaded
// so far, packed copies included, they must not need more than the system's MemAvailable, or
// loading stops with the two figures, instead of the kernel's OOM killer ending a rank half way
// through a long load.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>

namespace mlaserve::model {

// /proc/meminfo's MemAvailable in bytes (what can be allocated without swapping), or -1 when it
// cannot be read. MLASERVE_TEST_MEM_AVAILABLE_MB stands in for it in tests.
double mem_available_bytes();

class LoadProgress {
 public:
  // report: whether this rank speaks (one rank per model instance).
  LoadProgress(int64_t layers, bool report);

  // bytes_so_far: the layers' values copied; resident_so_far: with the kernels' packed copies.
  // Throws mlaserve::Error when the remaining layers would not fit in memory.
  void layer_loaded(int64_t layers_done, size_t bytes_so_far, size_t resident_so_far);
  void done(size_t bytes);

 private:
  double seconds() const;
  void check_memory(int64_t layers_done, size_t bytes_so_far, size_t resident_so_far) const;

  int64_t layers_;
  bool report_, terminal_;
  std::chrono::steady_clock::time_point start_;
};

}  // namespace mlaserve::model
