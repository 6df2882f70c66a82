#include "bench_serving/rng.h"

#include <cmath>
#include <limits>

namespace mlaserve::bench_serving {

int64_t Rng::uniform_int(int64_t low, int64_t high) {
  const uint64_t range = static_cast<uint64_t>(high - low) + 1;
  if (range == 0) return static_cast<int64_t>(engine_());  // the full 64-bit range
  const uint64_t limit =
      std::numeric_limits<uint64_t>::max() - std::numeric_limits<uint64_t>::max() % range;
  uint64_t draw = engine_();
  while (draw >= limit) draw = engine_();
  return low + static_cast<int64_t>(draw % range);
}

double Rng::uniform01() {
  return static_cast<double>(engine_() >> 11) * 0x1.0p-53;
}

double Rng::exponential(double rate) {
  return -std::log1p(-uniform01()) / rate;
}

}  // namespace mlaserve::bench_serving
