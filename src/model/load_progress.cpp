#include "model/load_progress.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <cstdio>

namespace mlaserve::model {

LoadProgress::LoadProgress(int64_t layers, bool report)
    : layers_(layers),
      report_(report),
      terminal_(report && isatty(STDERR_FILENO) != 0),
      start_(std::chrono::steady_clock::now()) {}

double LoadProgress::seconds() const {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
}

void LoadProgress::layer_loaded(int64_t layers_done, size_t bytes_so_far) {
  if (!terminal_ || layers_done == 0) return;
  const double elapsed = seconds(), mb = static_cast<double>(bytes_so_far) / 1e6;
  const double left =
      elapsed * static_cast<double>(layers_ - layers_done) / static_cast<double>(layers_done);
  std::fputs(fmt::format("\rloading weights: layer {}/{}, {:.0f} MB, {:.0f} MB/s, {:.0f} s left  ",
                         layers_done, layers_, mb, mb / std::max(elapsed, 1e-3), left)
                 .c_str(),
             stderr);
  std::fflush(stderr);
}

void LoadProgress::done(size_t bytes) {
  if (!report_) return;
  if (terminal_) std::fputs("\n", stderr);
  const double elapsed = seconds(), mb = static_cast<double>(bytes) / 1e6;
  spdlog::info("loaded {} layers, {:.1f} MB of weights, in {:.1f} s ({:.0f} MB/s)", layers_, mb,
               elapsed, mb / std::max(elapsed, 1e-3));
}

}  // namespace mlaserve::model
