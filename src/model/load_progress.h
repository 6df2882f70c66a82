// Progress of loading a model's layers. On a terminal, a line on stderr redrawn after each layer
// (layers done, MB copied, MB/s, time left); otherwise nothing until done(), which logs one line.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>

namespace mlaserve::model {

class LoadProgress {
 public:
  // report: whether this rank speaks (one rank per model instance).
  LoadProgress(int64_t layers, bool report);

  void layer_loaded(int64_t layers_done, size_t bytes_so_far);
  void done(size_t bytes);

 private:
  double seconds() const;

  int64_t layers_;
  bool report_, terminal_;
  std::chrono::steady_clock::time_point start_;
};

}  // namespace mlaserve::model
