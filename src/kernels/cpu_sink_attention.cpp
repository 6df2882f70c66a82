// DeepSeek-V4's attention of one query over its gathered rows, on the blocked online softmax of
// flash_block.h: all heads of the token form the query group (each row is loaded once per block
// and scored against every head), the rows are both k and v, and the sink joins the softmax at
// the end as one more logit of value 0.
#include <algorithm>
#include <cmath>
#include <vector>

#include "core/scratch.h"
#include "kernels/cpu_isa.h"
#include "kernels/flash_block.h"
#include "kernels/ops.h"
#include "kernels/reference.h"

namespace mlaserve::kernels {

void sink_attention(const SinkAttention& s, const float* q, const float* const* rows,
                    const float* sink, float* out) {
  if (!cpu_has_avx512()) return ref::sink_attention(s, q, rows, sink, out);
  const int64_t padded = round_up_to_tile(s.n_heads);
  thread_local std::vector<const float*> q_rows;
  thread_local std::vector<int64_t> row_end;
  thread_local std::vector<float> storage;
  q_rows.resize(static_cast<size_t>(padded));
  row_end.assign(static_cast<size_t>(s.n_heads), s.n_rows);
  for (int64_t h = 0; h < padded; ++h)
    q_rows[static_cast<size_t>(h)] = q + std::min(h, s.n_heads - 1) * s.dim;  // padding repeats
  const FlashQueries queries{s.n_heads, q_rows.data(), row_end.data(), s.dim, s.dim, s.scale};
  const FlashState state = flash_state_at(take(storage, flash_state_floats(padded, s.dim)), padded);
  flash_state_reset(state, padded, s.dim);
  FlashKvBlock blocks[2];
  auto fill = [&](FlashKvBlock& b, int64_t begin) {
    b.begin = begin;
    b.count = std::min(kFlashBlock, s.n_rows - begin);
    const int64_t filled = round_up_to_tile(b.count);
    for (int64_t j = 0; j < filled; ++j)
      b.k[j] = b.v[j] = rows[begin + std::min(j, b.count - 1)];  // padding repeats a real row
  };
  for (int64_t begin = 0, i = 0; begin < s.n_rows; begin += kFlashBlock, ++i) {
    FlashKvBlock& block = blocks[i % 2];
    if (begin == 0) fill(block, 0);
    FlashKvBlock* next = nullptr;
    if (begin + kFlashBlock < s.n_rows) {
      next = &blocks[(i + 1) % 2];
      fill(*next, begin + kFlashBlock);
    }
    flash_add_block(queries, block, next, state);
  }
  // The sink: one more logit, sink[h], of value 0.
  for (int64_t h = 0; h < s.n_heads; ++h) {
    const float max = std::max(state.max[h], sink[h]);
    const float rows_weight = state.max[h] == -INFINITY ? 0.0f : std::exp(state.max[h] - max);
    const float total = state.sum[h] * rows_weight + std::exp(sink[h] - max);
    const float* part = state.out + h * s.dim;
    float* o = out + h * s.dim;
    for (int64_t k = 0; k < s.dim; ++k)
      o[k] = rows_weight == 0.0f ? 0.0f : part[k] * rows_weight / total;
  }
}

}  // namespace mlaserve::kernels
