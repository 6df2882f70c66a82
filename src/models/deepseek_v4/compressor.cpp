#include "models/deepseek_v4/compressor.h"

#include "core/scratch.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace mlaserve::models::deepseek_v4 {

void SoftmaxSum::reset(int64_t dim) {
  max_.assign(static_cast<size_t>(dim), -std::numeric_limits<float>::infinity());
  sum_.assign(static_cast<size_t>(dim), 0.0f);
  acc_.assign(static_cast<size_t>(dim), 0.0f);
}

void SoftmaxSum::add(const float* score, const float* value) {
  for (size_t j = 0; j < max_.size(); ++j) {
    const float m = std::max(max_[j], score[j]);
    const float old = std::exp(max_[j] - m), now = std::exp(score[j] - m);
    sum_[j] = sum_[j] * old + now;
    acc_[j] = acc_[j] * old + now * value[j];
    max_[j] = m;
  }
}

void SoftmaxSum::value(float* out) const {
  for (size_t j = 0; j < max_.size(); ++j) out[j] = acc_[j] / sum_[j];
}

namespace {

// The window ending at pos is complete: its entry, normalised and rotated to the window's first
// position; the next window's candidates become the open entry's.
void complete_entry(const CompressorWeights& w, const Rope& rope, float eps, int64_t pos,
                    CompressorState& state, PooledRows& entries) {
  const int64_t D = w.dim;
  thread_local std::vector<float> entry;
  float* out = take(entry, D);
  state.own.value(out);
  kernels::rms_norm(out, w.norm.data(), 1, D, eps, out);
  rope.rotate(out, D, pos + 1 - w.ratio);
  entries.append(out);
  std::swap(state.own, state.next);
  state.next.reset(D);
  if (!w.overlap) state.own.reset(D);
}

}  // namespace

void compress(const CompressorWeights& w, const Rope& rope, float eps, const float* kv,
              float* score, int64_t n, int64_t first, CompressorState& state, PooledRows& entries,
              CompressorLog log) {
  const int64_t r = w.ratio, D = w.dim, width = w.width();
  if (first == 0) {
    state.own.reset(D);
    state.next.reset(D);
  }
  // With overlap a token is a candidate twice: through columns [D, 2D) for its own window's
  // entry, through [0, D) for the next one's.
  const int64_t own_column = w.overlap ? D : 0;
  for (int64_t t = 0; t < n; ++t) {
    const int64_t pos = first + t;
    float* s = score + t * width;
    const float* ape = w.ape.data() + (pos % r) * width;
    for (int64_t k = 0; k < width; ++k) s[k] += ape[k];
    state.own.add(s + own_column, kv + t * width + own_column);
    if (w.overlap) state.next.add(s, kv + t * width);
    if (pos % r == r - 1) complete_entry(w, rope, eps, pos, state, entries);
    if (log.states) {
      log.states->push_back(state);
      log.counts->push_back(entries.rows());
    }
  }
}

}  // namespace mlaserve::models::deepseek_v4
