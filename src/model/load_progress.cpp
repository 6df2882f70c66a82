#include "model/load_progress.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <limits>
#include <string>

#include "core/error.h"

namespace mlaserve::model {

LoadProgress::LoadProgress(int64_t layers, bool report)
    : layers_(layers),
      report_(report),
      terminal_(report && isatty(STDERR_FILENO) != 0),
      start_(std::chrono::steady_clock::now()) {}

double LoadProgress::seconds() const {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
}

double mem_available_bytes() {
  if (const char* fake = std::getenv("MLASERVE_TEST_MEM_AVAILABLE_MB"))
    return std::atof(fake) * 1e6;
  std::ifstream meminfo("/proc/meminfo");
  std::string key;
  double kib = 0;
  while (meminfo >> key >> kib) {
    if (key == "MemAvailable:") return kib * 1024;
    meminfo.ignore(std::numeric_limits<std::streamsize>::max(), '\n');
  }
  return -1;
}

void LoadProgress::check_memory(int64_t layers_done, size_t bytes_so_far,
                                size_t resident_so_far) const {
  const double available = mem_available_bytes();
  const double done = static_cast<double>(layers_done),
               left = static_cast<double>(layers_ - layers_done);
  // Still to allocate: the other layers' values and packed copies.
  const double needed = static_cast<double>(resident_so_far) / done * left;
  if (available < 0 || needed <= available) return;
  const double packed = static_cast<double>(resident_so_far - bytes_so_far) / done * left;
  // Named where the copies are a real share: a bf16 copy that replaced its row-major values
  // adds only oneDNN's padding, which --weight-packing off would not save.
  const std::string packing =
      packed > 0.1 * needed
          ? fmt::format(
                " ({:.0f} MB of it oneDNN's packed copies: --weight-packing off holds "
                "one copy)",
                packed / 1e6)
          : "";
  fail(
      "out of memory: after {} of {} layers ({:.0f} MB), the rest needs about {:.0f} MB more "
      "on this rank{}, but MemAvailable is {:.0f} MB; use more ranks (--tp), --quantization "
      "fp8/int8, or a host with more memory",
      layers_done, layers_, static_cast<double>(bytes_so_far) / 1e6, needed / 1e6, packing,
      available / 1e6);
}

void LoadProgress::layer_loaded(int64_t layers_done, size_t bytes_so_far, size_t resident_so_far) {
  if (layers_done == 0) return;
  check_memory(layers_done, bytes_so_far, resident_so_far);
  if (!terminal_) return;
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
