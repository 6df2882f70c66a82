// AVX-512 GEMV for small m. Each pass computes a tile of kRows weight rows × kM x rows with
// kRows·kM named accumulators (fully unrolled constant-index arrays, which g++ keeps in
// registers), so every weight vector loaded from memory serves kM rows of x and every x vector
// serves kRows weight rows. Threads split the weight rows into contiguous ranges, so each core
// streams its own part of W once.
#include <algorithm>
#include <vector>

#include "kernels/avx512_util.h"
#include "kernels/gemv.h"
#include "kernels/parallel.h"

namespace mlaserve::kernels {
namespace {

// Weight rows and x rows per pass: up to 8 × 3 = 24 accumulators + 3 x vectors + 1 weight
// vector fit the 32 zmm registers. Eight rows are eight concurrent DRAM streams, which at
// m = 1..2 streamed W 5-15 % faster than four rows did.
constexpr int kTileRows = 8;
constexpr int kTileM = 3;                      // larger m loops over groups of kTileM x rows
constexpr int64_t kMinParallelWork = 1 << 16;  // weight elements below which one thread is faster

// ---- F32 weights ------------------------------------------------------------------------

// y[i * y_stride + r] = x[i, :k] · w[r, :k] for r < kRows, i < kM. x rows are k floats apart.
// `next` is the weight block the thread reads after this one: it is fetched into L2 in step,
// because with short rows (K = 1024: 2-4 KB) the hardware prefetcher has no time to ramp up
// on each new set of row streams.
template <int kRows, int kM>
MLASERVE_AVX512 void tile_f32(const float* x, const float* w, const float* next, int64_t k,
                              float* y, int64_t y_stride) {
  __m512 acc[kRows][kM];
#pragma GCC unroll 8
  for (int r = 0; r < kRows; ++r)
#pragma GCC unroll 8
    for (int i = 0; i < kM; ++i) acc[r][i] = _mm512_setzero_ps();

  int64_t c = 0;
  for (; c + 16 <= k; c += 16) {
    __m512 xv[kM];
#pragma GCC unroll 8
    for (int i = 0; i < kM; ++i) {
      xv[i] = _mm512_loadu_ps(x + i * k + c);
      keep_in_register(xv[i]);
    }
#pragma GCC unroll 8
    for (int r = 0; r < kRows; ++r) {
      _mm_prefetch(next + r * k + c, _MM_HINT_T1);
      __m512 wv = _mm512_loadu_ps(w + r * k + c);
      keep_in_register(wv);
#pragma GCC unroll 8
      for (int i = 0; i < kM; ++i) acc[r][i] = _mm512_fmadd_ps(wv, xv[i], acc[r][i]);
    }
  }
  if (c < k) {  // k % 16 tail: masked loads read zeros past the end of each row
    const __mmask16 tail = first_lanes16(k - c);
    __m512 xv[kM];
#pragma GCC unroll 8
    for (int i = 0; i < kM; ++i) xv[i] = _mm512_maskz_loadu_ps(tail, x + i * k + c);
#pragma GCC unroll 8
    for (int r = 0; r < kRows; ++r) {
      const __m512 wv = _mm512_maskz_loadu_ps(tail, w + r * k + c);
#pragma GCC unroll 8
      for (int i = 0; i < kM; ++i) acc[r][i] = _mm512_fmadd_ps(wv, xv[i], acc[r][i]);
    }
  }
#pragma GCC unroll 8
  for (int r = 0; r < kRows; ++r)
#pragma GCC unroll 8
    for (int i = 0; i < kM; ++i) y[i * y_stride + r] = hsum(acc[r][i]);
}

// All x rows against weight rows [row, row + rows), rows <= kTileRows.
template <int kRows>
MLASERVE_AVX512 void row_block_f32(const float* x, int64_t m, const float* w, int64_t n, int64_t k,
                                   int64_t row, float* y) {
  const float* w_rows = w + row * k;
  const float* next = row + kRows + kTileRows <= n ? w_rows + kRows * k : w_rows;
  int64_t i = 0;
  for (; i + kTileM <= m; i += kTileM)
    tile_f32<kRows, kTileM>(x + i * k, w_rows, next, k, y + i * n + row, n);
  switch (m - i) {
    case 1:
      tile_f32<kRows, 1>(x + i * k, w_rows, next, k, y + i * n + row, n);
      break;
    case 2:
      tile_f32<kRows, 2>(x + i * k, w_rows, next, k, y + i * n + row, n);
      break;
    default:
      break;
  }
}

// ---- BF16 weights -----------------------------------------------------------------------

// As tile_f32, with bf16 weights and bf16 x (rows k_padded apart); vdpbf16ps multiplies
// pairs of bf16 and adds both products to one fp32 lane.
template <int kRows, int kM>
MLASERVE_AVX512_BF16 void tile_bf16(const bf16* x, int64_t k_padded, const bf16* w,
                                    const bf16* next, int64_t k, float* y, int64_t y_stride) {
  __m512 acc[kRows][kM];
#pragma GCC unroll 8
  for (int r = 0; r < kRows; ++r)
#pragma GCC unroll 8
    for (int i = 0; i < kM; ++i) acc[r][i] = _mm512_setzero_ps();

  int64_t c = 0;
  for (; c + 32 <= k; c += 32) {
    __m512bh xv[kM];
#pragma GCC unroll 8
    for (int i = 0; i < kM; ++i) xv[i] = (__m512bh)_mm512_loadu_si512(x + i * k_padded + c);
#pragma GCC unroll 8
    for (int r = 0; r < kRows; ++r) {
      _mm_prefetch(next + r * k + c, _MM_HINT_T1);
      const __m512bh wv = (__m512bh)_mm512_loadu_si512(w + r * k + c);
#pragma GCC unroll 8
      for (int i = 0; i < kM; ++i) acc[r][i] = _mm512_dpbf16_ps(acc[r][i], wv, xv[i]);
    }
  }
  if (c < k) {  // k % 32 tail: x is zero-padded, so only the weight load needs a mask
    const __mmask32 tail = first_lanes32(k - c);
    __m512bh xv[kM];
#pragma GCC unroll 8
    for (int i = 0; i < kM; ++i) xv[i] = (__m512bh)_mm512_loadu_si512(x + i * k_padded + c);
#pragma GCC unroll 8
    for (int r = 0; r < kRows; ++r) {
      const __m512bh wv = (__m512bh)_mm512_maskz_loadu_epi16(tail, w + r * k + c);
#pragma GCC unroll 8
      for (int i = 0; i < kM; ++i) acc[r][i] = _mm512_dpbf16_ps(acc[r][i], wv, xv[i]);
    }
  }
#pragma GCC unroll 8
  for (int r = 0; r < kRows; ++r)
#pragma GCC unroll 8
    for (int i = 0; i < kM; ++i) y[i * y_stride + r] = hsum(acc[r][i]);
}

template <int kRows>
MLASERVE_AVX512_BF16 void row_block_bf16(const bf16* x, int64_t m, int64_t k_padded, const bf16* w,
                                         int64_t n, int64_t k, int64_t row, float* y) {
  const bf16* w_rows = w + row * k;
  const bf16* next = row + kRows + kTileRows <= n ? w_rows + kRows * k : w_rows;
  int64_t i = 0;
  for (; i + kTileM <= m; i += kTileM) {
    tile_bf16<kRows, kTileM>(x + i * k_padded, k_padded, w_rows, next, k, y + i * n + row, n);
  }
  switch (m - i) {
    case 1:
      tile_bf16<kRows, 1>(x + i * k_padded, k_padded, w_rows, next, k, y + i * n + row, n);
      break;
    case 2:
      tile_bf16<kRows, 2>(x + i * k_padded, k_padded, w_rows, next, k, y + i * n + row, n);
      break;
    default:
      break;
  }
}

// Runs block(row, rows) over [0, n) in blocks of kTileRows rows (the last one may be short),
// split across threads in contiguous ranges.
template <typename Block>
void for_each_row_block(int64_t n, int64_t k, Block block) {
  const int64_t blocks = (n + kTileRows - 1) / kTileRows;
  for_ranges(blocks, n * k >= kMinParallelWork, [&](int64_t first, int64_t last) {
    for (int64_t b = first; b < last; ++b) {
      const int64_t row = b * kTileRows;
      block(row, std::min<int64_t>(kTileRows, n - row));
    }
  });
}

MLASERVE_AVX512_BF16 void round_row_to_bf16(const float* x, int64_t cols, int64_t padded_cols,
                                            bf16* out) {
  for (int64_t c = 0; c < padded_cols; c += 16) {
    const __mmask16 valid = first_lanes16(std::max<int64_t>(cols - c, 0));
    const __mmask16 inside = first_lanes16(padded_cols - c);
    const __m256bh rounded = _mm512_cvtneps_pbh(_mm512_maskz_loadu_ps(valid, x + c));
    _mm256_mask_storeu_epi16(out + c, inside, (__m256i)rounded);
  }
}

}  // namespace

void round_rows_to_bf16(const float* x, int64_t rows, int64_t cols, int64_t out_stride, bf16* out) {
  for_ranges(rows, rows * cols >= kMinParallelWork, [&](int64_t first, int64_t last) {
    for (int64_t r = first; r < last; ++r)
      round_row_to_bf16(x + r * cols, cols, out_stride, out + r * out_stride);
  });
}

void gemv_f32(const float* x, int64_t m, const float* w, int64_t n, int64_t k, float* y) {
  for_each_row_block(n, k, [&](int64_t row, int64_t rows) {
    if (rows == kTileRows) {
      row_block_f32<kTileRows>(x, m, w, n, k, row, y);
    } else {
      for (int64_t r = row; r < row + rows; ++r) row_block_f32<1>(x, m, w, n, k, r, y);
    }
  });
}

void gemv_bf16(const float* x, int64_t m, const bf16* w, int64_t n, int64_t k, float* y) {
  const int64_t k_padded = (k + 31) / 32 * 32;
  thread_local std::vector<bf16> x_rounded;
  x_rounded.resize(static_cast<size_t>(m * k_padded));
  round_rows_to_bf16(x, m, k, k_padded, x_rounded.data());  // zero padding: no x tail masks
  const bf16* xb = x_rounded.data();
  for_each_row_block(n, k, [&](int64_t row, int64_t rows) {
    if (rows == kTileRows) {
      row_block_bf16<kTileRows>(xb, m, k_padded, w, n, k, row, y);
    } else {
      for (int64_t r = row; r < row + rows; ++r) row_block_bf16<1>(xb, m, k_padded, w, n, k, r, y);
    }
  });
}

}  // namespace mlaserve::kernels
