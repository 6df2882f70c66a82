// RoPE of DeepSeek-V4: interleaved pairs of the last rd dims of a vector. Compressing layers use
// compress_rope_theta with YaRN, window-only layers rope_theta without; no magnitude scaling.
// Angles are computed per call (V4's 1M positions would make a table of 256 MB per base).
#pragma once

#include <cstdint>
#include <vector>

#include "models/deepseek_v4/config.h"

namespace mlaserve::models::deepseek_v4 {

class Rope {
 public:
  Rope(const V4Config& c, bool compressing);
  // The angles of a position, computed once for the many vectors rotated there (a token's heads,
  // its row, its output): angle_floats() floats, rd/2 cosines, rd/2 sines, rd/2 negated sines.
  void angles(int64_t pos, float* angles) const;
  int64_t angle_floats() const { return 3 * static_cast<int64_t>(inv_freq_.size()); }
  // Rotates the last rd dims of n vectors of dim values (stride floats apart) by `angles`, or
  // back when inverse. A plain loop rather than kernels::rope_interleaved: that kernel's FMA
  // rounding moved rows near bf16 rounding boundaries, so that over a bf16 cache decode no longer
  // matched prefill within the test's 1e-5 (their GEMV and GEMM rows already differ by ulps).
  void rotate(float* v, int64_t n, int64_t stride, int64_t dim, const float* angles,
              bool inverse = false) const;
  // The same for one vector at position pos.
  void rotate(float* v, int64_t dim, int64_t pos) const;

 private:
  std::vector<double> inv_freq_;
};

}  // namespace mlaserve::models::deepseek_v4
