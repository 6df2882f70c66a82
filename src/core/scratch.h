// Scratch buffers kept across steps: a step takes the first n elements of one, and it grows only
// when a step needs more, so that the steady state allocates nothing (no per-step allocation,
// zero-fill or page faults, and no heap high-water marks left behind by freed temporaries).
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace mlaserve {

// The first n elements of a reused buffer, grown when too small; the contents are stale.
template <typename T>
T* take(std::vector<T>& buffer, int64_t n) {
  if (buffer.size() < static_cast<size_t>(n)) buffer.resize(static_cast<size_t>(n));
  return buffer.data();
}

}  // namespace mlaserve
