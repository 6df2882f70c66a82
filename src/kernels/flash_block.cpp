#include "kernels/flash_block.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "kernels/avx512_util.h"

namespace mlaserve::kernels {
namespace {

// acc[4r + j] += q[r][c..c+16) · k[j][c..c+16) lane-wise, lanes outside `valid` read as 0.
MLASERVE_AVX512 inline void score_step(const float* const* q, const float* const* k, int64_t c,
                                       __mmask16 valid, __m512 (&acc)[16]) {
  __m512 qv[4], kv[4];
#pragma GCC unroll 4
  for (int i = 0; i < 4; ++i) {
    qv[i] = _mm512_maskz_loadu_ps(valid, q[i] + c);
    kv[i] = _mm512_maskz_loadu_ps(valid, k[i] + c);
    keep_in_register(qv[i]);
    keep_in_register(kv[i]);
  }
#pragma GCC unroll 4
  for (int r = 0; r < 4; ++r)
#pragma GCC unroll 4
    for (int j = 0; j < 4; ++j) acc[4 * r + j] = _mm512_fmadd_ps(qv[r], kv[j], acc[4 * r + j]);
}

// s[r * kFlashBlock + c] = Σ acc[4r + c] for r, c < 4.
MLASERVE_AVX512 inline void store_scores(const __m512 (&acc)[16], float* s) {
  const __m512 sums =
      sum_lanes(sum_quads(sum_pairs(acc[0], acc[1]), sum_pairs(acc[2], acc[3])),
                sum_quads(sum_pairs(acc[4], acc[5]), sum_pairs(acc[6], acc[7])),
                sum_quads(sum_pairs(acc[8], acc[9]), sum_pairs(acc[10], acc[11])),
                sum_quads(sum_pairs(acc[12], acc[13]), sum_pairs(acc[14], acc[15])));
  _mm_storeu_ps(s, _mm512_castps512_ps128(sums));
  _mm_storeu_ps(s + kFlashBlock, _mm512_extractf32x4_ps(sums, 1));
  _mm_storeu_ps(s + 2 * kFlashBlock, _mm512_extractf32x4_ps(sums, 2));
  _mm_storeu_ps(s + 3 * kFlashBlock, _mm512_extractf32x4_ps(sums, 3));
}

// s[r * kFlashBlock + c] = q[r] · k[c] over d floats, for r, c < 4.
MLASERVE_AVX512 void score_tile(const float* const* q, const float* const* k, int64_t d, float* s) {
  __m512 acc[16];
#pragma GCC unroll 16
  for (int i = 0; i < 16; ++i) acc[i] = _mm512_setzero_ps();
  int64_t c = 0;
  for (; c + 16 <= d; c += 16) score_step(q, k, c, 0xffff, acc);
  if (c < d) score_step(q, k, c, first_lanes16(d - c), acc);
  store_scores(acc, s);
}

// As score_tile, on bf16 rows: 32 columns per vdpbf16ps (products exact, sums in float32).
MLASERVE_AVX512_BF16 void score_tile_bf16(const bf16* const* q, const bf16* const* k, int64_t d,
                                          float* s) {
  __m512 acc[16];
#pragma GCC unroll 16
  for (int i = 0; i < 16; ++i) acc[i] = _mm512_setzero_ps();
  for (int64_t c = 0; c < d; c += 32) {
    const __mmask32 valid = first_lanes32(d - c);
    __m512bh qv[4], kv[4];
#pragma GCC unroll 4
    for (int i = 0; i < 4; ++i) {
      qv[i] = (__m512bh)_mm512_maskz_loadu_epi16(valid, q[i] + c);
      kv[i] = (__m512bh)_mm512_maskz_loadu_epi16(valid, k[i] + c);
    }
#pragma GCC unroll 4
    for (int r = 0; r < 4; ++r)
#pragma GCC unroll 4
      for (int j = 0; j < 4; ++j) acc[4 * r + j] = _mm512_dpbf16_ps(acc[4 * r + j], qv[r], kv[j]);
  }
  store_scores(acc, s);
}

// s[r * kFlashBlock + j] = q[r] · k[j] for r < kRows and every j of a block given transposed
// (k_t[c * kFlashBlock + j] = k[j][c]): the kv rows lie in the lanes and each q value is
// broadcast into a multiply-add, so no horizontal sums are needed (with d_qk = 96 they took
// about half of score_tile's time).
template <int kRows>
MLASERVE_AVX512 void score_rows_transposed(const float* const* q, const float* k_t, int64_t d,
                                           float* s) {
  static_assert(kFlashBlock == 32, "two vectors of kv rows per k_t row");
  __m512 lo[kRows], hi[kRows];
#pragma GCC unroll 8
  for (int r = 0; r < kRows; ++r) lo[r] = hi[r] = _mm512_setzero_ps();
  for (int64_t c = 0; c < d; ++c) {
    const __m512 k0 = _mm512_loadu_ps(k_t + c * kFlashBlock);
    const __m512 k1 = _mm512_loadu_ps(k_t + c * kFlashBlock + 16);
#pragma GCC unroll 8
    for (int r = 0; r < kRows; ++r) {
      const __m512 qv = _mm512_set1_ps(q[r][c]);
      lo[r] = _mm512_fmadd_ps(qv, k0, lo[r]);
      hi[r] = _mm512_fmadd_ps(qv, k1, hi[r]);
    }
  }
#pragma GCC unroll 8
  for (int r = 0; r < kRows; ++r) {
    _mm512_storeu_ps(s + r * kFlashBlock, lo[r]);
    _mm512_storeu_ps(s + r * kFlashBlock + 16, hi[r]);
  }
}

// Requests rows[0, count) (d floats each) into L2.
void prefetch_rows(const float* const* rows, int64_t count, int64_t d) {
  for (int64_t r = 0; r < count; ++r) {
    for (int64_t f = 0; f < d; f += 16) _mm_prefetch(rows[r] + f, _MM_HINT_T1);
    _mm_prefetch(rows[r] + d - 1, _MM_HINT_T1);  // the last line when rows are not aligned
  }
}

// p[r, c] = q[r] · k[c] for all padded query rows r and the block's padded kv rows c, while
// prefetching the matching tile of the next block.
void score_block(const FlashQueries& queries, const FlashKvBlock& block, const FlashKvBlock* next,
                 float* p) {
  const int64_t rows_padded = round_up_to_tile(queries.n_rows);
  if (block.k_t) {
    if (next && next->k_t) {
      const int64_t floats = flash_block_k_t_floats(queries.d_qk);
      for (int64_t f = 0; f < floats; f += 16) _mm_prefetch(next->k_t + f, _MM_HINT_T1);
    }
    int64_t r = 0;
    for (; r + 8 <= rows_padded; r += 8)
      score_rows_transposed<8>(queries.q + r, block.k_t, queries.d_qk, p + r * kFlashBlock);
    for (; r < rows_padded; r += kFlashTile)
      score_rows_transposed<kFlashTile>(queries.q + r, block.k_t, queries.d_qk,
                                        p + r * kFlashBlock);
    return;
  }
  const bool bf16_scores = queries.q_b16 != nullptr;
  for (int64_t c = 0; c < round_up_to_tile(block.count); c += kFlashTile) {
    if (next && c < next->count && !bf16_scores) {  // bf16 rows: the caller prefetches them
      prefetch_rows(next->k + c, std::min(kFlashTile, next->count - c), queries.d_qk);
    }
    for (int64_t r = 0; r < rows_padded; r += kFlashTile) {
      if (bf16_scores) {
        score_tile_bf16(queries.q_b16 + r, block.k_b16 + c, queries.d_qk, p + r * kFlashBlock + c);
      } else {
        score_tile(queries.q + r, block.k + c, queries.d_qk, p + r * kFlashBlock + c);
      }
    }
  }
}

// Turns row r's scores (kFlashBlock of them, `valid` visible) into exp(score·scale - new max),
// updates the running max and sum, and returns the factor exp(old max - new max) by which the
// row's output must shrink.
MLASERVE_AVX512 float softmax_update(float* p, __mmask32 valid, float scale, float& max,
                                     float& sum) {
  const __m512 minus_inf = _mm512_set1_ps(-INFINITY);
  const __m512 s0 = _mm512_mask_mul_ps(minus_inf, static_cast<__mmask16>(valid), _mm512_loadu_ps(p),
                                       _mm512_set1_ps(scale));
  const __m512 s1 = _mm512_mask_mul_ps(minus_inf, static_cast<__mmask16>(valid >> 16),
                                       _mm512_loadu_ps(p + 16), _mm512_set1_ps(scale));
  const float new_max = std::max(max, hmax(_mm512_max_ps(s0, s1)));
  if (new_max == -INFINITY) {  // nothing visible yet: probabilities 0, state unchanged
    _mm512_storeu_ps(p, _mm512_setzero_ps());
    _mm512_storeu_ps(p + 16, _mm512_setzero_ps());
    return 1.0f;
  }
  const __m512 shift = _mm512_set1_ps(new_max);
  const __m512 p0 = exp512(_mm512_sub_ps(s0, shift)), p1 = exp512(_mm512_sub_ps(s1, shift));
  _mm512_storeu_ps(p, p0);
  _mm512_storeu_ps(p + 16, p1);
  const float correction = std::exp(max - new_max);  // max = -inf at the start gives 0
  sum = sum * correction + hsum(_mm512_add_ps(p0, p1));
  max = new_max;
  return correction;
}

// out[r, col + i] = out[r, col + i]·correction[r] + Σ_j p[r, j]·v[j][col + i] for the 4 rows
// of a tile and kVecs vectors of 16 columns; the last vector keeps only `last` lanes.
template <int kVecs>
MLASERVE_AVX512 void pv_tile(const float* p, const float* correction, const float* const* v_rows,
                             int64_t count, int64_t col, __mmask16 last, float* out, int64_t d_v) {
  __mmask16 masks[kVecs];
#pragma GCC unroll 4
  for (int i = 0; i < kVecs; ++i) masks[i] = i + 1 == kVecs ? last : static_cast<__mmask16>(0xffff);
  __m512 acc[4][kVecs];
#pragma GCC unroll 4
  for (int r = 0; r < 4; ++r) {
    const __m512 shrink = _mm512_set1_ps(correction[r]);
#pragma GCC unroll 4
    for (int i = 0; i < kVecs; ++i) {
      acc[r][i] =
          _mm512_mul_ps(shrink, _mm512_maskz_loadu_ps(masks[i], out + r * d_v + col + 16 * i));
    }
  }
  for (int64_t j = 0; j < count; ++j) {
    __m512 vv[kVecs];
#pragma GCC unroll 4
    for (int i = 0; i < kVecs; ++i)
      vv[i] = _mm512_maskz_loadu_ps(masks[i], v_rows[j] + col + 16 * i);
#pragma GCC unroll 4
    for (int r = 0; r < 4; ++r) {
      const __m512 weight = _mm512_set1_ps(p[r * kFlashBlock + j]);
#pragma GCC unroll 4
      for (int i = 0; i < kVecs; ++i) acc[r][i] = _mm512_fmadd_ps(weight, vv[i], acc[r][i]);
    }
  }
#pragma GCC unroll 4
  for (int r = 0; r < 4; ++r)
#pragma GCC unroll 4
    for (int i = 0; i < kVecs; ++i)
      _mm512_mask_storeu_ps(out + r * d_v + col + 16 * i, masks[i], acc[r][i]);
}

// P·V for one tile of 4 query rows across all d_v columns, 64 columns per pass.
void pv_rows(const float* p, const float* correction, const float* const* v_rows, int64_t count,
             float* out, int64_t d_v) {
  for (int64_t col = 0; col < d_v; col += 64) {
    const int64_t width = std::min<int64_t>(64, d_v - col);
    const __mmask16 last = first_lanes16(width - (width - 1) / 16 * 16);
    switch ((width + 15) / 16) {
      case 1:
        pv_tile<1>(p, correction, v_rows, count, col, last, out, d_v);
        break;
      case 2:
        pv_tile<2>(p, correction, v_rows, count, col, last, out, d_v);
        break;
      case 3:
        pv_tile<3>(p, correction, v_rows, count, col, last, out, d_v);
        break;
      default:
        pv_tile<4>(p, correction, v_rows, count, col, last, out, d_v);
        break;
    }
  }
}

// Per-thread buffers for one block: probabilities [rows_padded, kFlashBlock], corrections.
struct BlockScratch {
  std::vector<float> p, correction;
};

}  // namespace

FlashState flash_state_at(float* storage, int64_t rows_padded) {
  return FlashState{storage, storage + rows_padded, storage + 2 * rows_padded};
}

void flash_state_reset(const FlashState& state, int64_t rows_padded, int64_t d_v) {
  std::fill(state.max, state.max + rows_padded, -INFINITY);
  std::fill(state.sum, state.sum + rows_padded, 0.0f);
  std::fill(state.out, state.out + rows_padded * d_v, 0.0f);
}

void flash_add_block(const FlashQueries& queries, const FlashKvBlock& block,
                     const FlashKvBlock* next, const FlashState& state) {
  const int64_t rows_padded = round_up_to_tile(queries.n_rows);
  thread_local BlockScratch scratch;
  scratch.p.resize(static_cast<size_t>(rows_padded * kFlashBlock));
  scratch.correction.resize(static_cast<size_t>(rows_padded));
  float* p = scratch.p.data();
  float* correction = scratch.correction.data();

  score_block(queries, block, next, p);
  for (int64_t r = 0; r < rows_padded; ++r) {
    const int64_t visible =
        r < queries.n_rows ? std::clamp<int64_t>(queries.row_end[r] - block.begin, 0, block.count)
                           : 0;
    correction[r] = softmax_update(p + r * kFlashBlock, first_lanes32(visible), queries.scale,
                                   state.max[r], state.sum[r]);
  }
  for (int64_t r = 0; r < rows_padded; r += kFlashTile) {
    pv_rows(p + r * kFlashBlock, correction + r, block.v, block.count, state.out + r * queries.d_v,
            queries.d_v);
  }
}

void flash_write_row(const FlashState* states, int64_t n_states, int64_t row, int64_t d_v,
                     float* dst) {
  float max = -INFINITY;
  for (int64_t s = 0; s < n_states; ++s) max = std::max(max, states[s].max[row]);
  float sum = 0.0f;
  for (int64_t s = 0; s < n_states; ++s)
    sum += states[s].sum[row] * std::exp(states[s].max[row] - max);
  std::fill(dst, dst + d_v, 0.0f);
  for (int64_t s = 0; s < n_states; ++s) {
    if (states[s].max[row] == -INFINITY) continue;  // this part saw no kv rows
    const float weight = std::exp(states[s].max[row] - max) / sum;
    const float* part = states[s].out + row * d_v;
    for (int64_t i = 0; i < d_v; ++i) dst[i] += weight * part[i];
  }
}

}  // namespace mlaserve::kernels
