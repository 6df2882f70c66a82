#include "models/deepseek_v4/compressor.h"

#include "core/error.h"
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

RowStore::RowStore(KvDtype dtype, int64_t dim, int64_t rows)
    : dtype_(dtype),
      dim_(dim),
      row_bytes_(kv_value_bytes(dtype) * dim),
      bytes_(static_cast<size_t>(rows * row_bytes_)) {
  if (dtype == KvDtype::Fp8E4m3)
    fail("DeepSeek-V4 keeps its KV rows in float32 or bfloat16 (--kv-cache-dtype), not fp8_e4m3");
}

void RowStore::append(const float* row) {
  bytes_.resize(bytes_.size() + static_cast<size_t>(row_bytes_));
  put(rows() - 1, row);
}

void RowStore::put(int64_t i, const float* row) {
  encode_kv_row(dtype_, row, dim_, bytes_.data() + i * row_bytes_, nullptr);
}

void RowStore::read(int64_t first, int64_t n, float* out) const {
  const KvRows rows = view();
  for (int64_t i = 0; i < n; ++i) decode_kv_row(rows, first + i, out + i * dim_);
}

void compress(const CompressorWeights& w, const Rope& rope, float eps, const float* x, int64_t n,
              int64_t first, CompressorState& state, RowStore& entries) {
  const int64_t r = w.ratio, D = w.dim, width = w.width();
  thread_local std::vector<float> kv_buf, score_buf;  // scratch kept across steps
  float* kv = take(kv_buf, n * width);
  float* score = take(score_buf, n * width);
  kernels::matmul(x, n, w.wkv, kv);
  kernels::matmul(x, n, w.wgate, score);
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
    if (pos % r != r - 1) continue;
    // The window is complete: its entry, normalised and rotated to the window's first position.
    thread_local std::vector<float> entry;
    float* out = take(entry, D);
    state.own.value(out);
    kernels::rms_norm(out, w.norm.data(), 1, D, eps, out);
    rope.apply(out, D, pos + 1 - r);
    entries.append(out);
    std::swap(state.own, state.next);
    state.next.reset(D);
    if (!w.overlap) state.own.reset(D);
  }
}

}  // namespace mlaserve::models::deepseek_v4
