#include "models/deepseek_v4/rope.h"

#include <cmath>

#include "model/rope.h"

namespace mlaserve::models::deepseek_v4 {

Rope::Rope(const V4Config& c, bool compressing)
    : inv_freq_(model::RopeTable::inv_freq(c.qk_rope_head_dim,
                                           compressing ? c.compress_rope_theta : c.rope_theta,
                                           compressing ? c.yarn : std::nullopt)) {}

void Rope::angles(int64_t pos, float* cos_sin) const {
  const auto half = static_cast<int64_t>(inv_freq_.size());
  for (int64_t i = 0; i < half; ++i) {
    const double theta = static_cast<double>(pos) * inv_freq_[static_cast<size_t>(i)];
    cos_sin[i] = static_cast<float>(std::cos(theta));
    cos_sin[half + i] = static_cast<float>(std::sin(theta));
  }
}

void Rope::apply(float* v, int64_t dim, const float* cos_sin, bool inverse) const {
  const auto half = static_cast<int64_t>(inv_freq_.size());
  float* x = v + dim - 2 * half;
  for (int64_t i = 0; i < half; ++i) {
    const float cos = cos_sin[i], sin = inverse ? -cos_sin[half + i] : cos_sin[half + i];
    const float a = x[2 * i], b = x[2 * i + 1];
    x[2 * i] = a * cos - b * sin;
    x[2 * i + 1] = a * sin + b * cos;
  }
}

void Rope::apply(float* v, int64_t dim, int64_t pos, bool inverse) const {
  thread_local std::vector<float> cos_sin;
  cos_sin.resize(static_cast<size_t>(angle_floats()));
  angles(pos, cos_sin.data());
  apply(v, dim, cos_sin.data(), inverse);
}

}  // namespace mlaserve::models::deepseek_v4
