// Products with a few rows of x on a bf16 weight's packed copy (oneDNN's BA16a64b2a, the copy
// prepare() makes for the GEMM). There a panel of 64 weight rows is one contiguous run in which
// each pair of columns holds the 64 rows' two values side by side: four zmm registers per pair.
// So a product needs no horizontal sums: every x row's pair of values is broadcast once and
// multiplied (vdpbf16ps) into 4 accumulators of 16 outputs each, the whole K long, and the
// accumulators are the outputs. With 6 x rows that is 24 products per 4 weight loads and 6
// broadcasts, where the row-major GEMV's tile (gemv.h) needs a reduction per output and takes
// at most 3 x rows per weight load.
#include <algorithm>

#include "kernels/avx512_util.h"
#include "kernels/gemv.h"

namespace mlaserve::kernels {
namespace {

constexpr int64_t kPanelRows = 64;  // weight rows per panel: the packed layout's block
constexpr int kGroupRows = 6;       // x rows per pass: 6 × 4 accumulators + 4 weight vectors
// Most rows of x a panel multiplies by vdpbf16ps where the CPU has AMX tiles. Past 8 rows the
// vdpbf16ps kernels are compute-bound there (half the f32 FMA rate on Intel) while the tiles,
// even half-filled (an A tile takes 16 rows), still stream the weight at memory speed.
constexpr int64_t kMaxVdpRows = 8;

// y[i * ldy + c] = x row i · weight row c of the panel, for i < kM and c < cols (<= 64). The
// panel holds `pairs` column pairs (K padded to the layout's 32), 128 bf16 values each; x rows
// (bf16, zero past K) are k_padded apart.
template <int kM>
MLASERVE_AVX512_BF16 void panel_tile(const bf16* panel, int64_t pairs, const bf16* x,
                                     int64_t k_padded, float* y, int64_t ldy, int64_t cols) {
  __m512 acc[kM][4];
#pragma GCC unroll 8
  for (int i = 0; i < kM; ++i)
#pragma GCC unroll 4
    for (int j = 0; j < 4; ++j) acc[i][j] = _mm512_setzero_ps();
  const auto* x_pairs = reinterpret_cast<const int32_t*>(x);
  const int64_t x_stride = k_padded / 2;
  for (int64_t p = 0; p < pairs; ++p) {
    const bf16* w = panel + p * 2 * kPanelRows;
    __m512bh wv[4];
#pragma GCC unroll 4
    for (int j = 0; j < 4; ++j) wv[j] = (__m512bh)_mm512_loadu_si512(w + 32 * j);
#pragma GCC unroll 8
    for (int i = 0; i < kM; ++i) {
      const __m512bh xv = (__m512bh)_mm512_set1_epi32(x_pairs[i * x_stride + p]);
#pragma GCC unroll 4
      for (int j = 0; j < 4; ++j) acc[i][j] = _mm512_dpbf16_ps(acc[i][j], xv, wv[j]);
    }
  }
#pragma GCC unroll 8
  for (int i = 0; i < kM; ++i)
#pragma GCC unroll 4
    for (int j = 0; j < 4; ++j) {
      const int64_t c = 16 * j;
      _mm512_mask_storeu_ps(y + i * ldy + c, first_lanes16(std::max<int64_t>(cols - c, 0)),
                            acc[i][j]);
    }
}

// All m x rows against one panel, kGroupRows at a time (the panel is re-read from L2 for each
// group after the first).
void panel_product(const bf16* panel, int64_t pairs, const bf16* x, int64_t m, int64_t k_padded,
                   float* y, int64_t ldy, int64_t cols) {
  int64_t i = 0;
  for (; i + kGroupRows <= m; i += kGroupRows)
    panel_tile<kGroupRows>(panel, pairs, x + i * k_padded, k_padded, y + i * ldy, ldy, cols);
  const bf16* xi = x + i * k_padded;
  float* yi = y + i * ldy;
  switch (m - i) {
    case 1:
      return panel_tile<1>(panel, pairs, xi, k_padded, yi, ldy, cols);
    case 2:
      return panel_tile<2>(panel, pairs, xi, k_padded, yi, ldy, cols);
    case 3:
      return panel_tile<3>(panel, pairs, xi, k_padded, yi, ldy, cols);
    case 4:
      return panel_tile<4>(panel, pairs, xi, k_padded, yi, ldy, cols);
    case 5:
      return panel_tile<5>(panel, pairs, xi, k_padded, yi, ldy, cols);
    default:
      return;
  }
}

}  // namespace

int64_t packed_panel_rows() {
  return kPanelRows;
}

bool packed_rows_on_amx(int64_t m) {
  return m > kMaxVdpRows && cpu_has_amx_bf16();
}

void gemv_packed_panel(const bf16* panel, int64_t k_padded, const bf16* xb, int64_t m, float* y,
                       int64_t ldy, int64_t rows) {
  if (packed_rows_on_amx(m)) {
    amx_packed_panel(panel, k_padded, xb, m, y, ldy, rows);
  } else {
    panel_product(panel, k_padded / 2, xb, m, k_padded, y, ldy, rows);
  }
}

void gemv_packed_rows(const GemvJob& job, const bf16* xb, int64_t k_padded, int64_t first,
                      int64_t last) {
  for (int64_t row = first; row < last; row += kPanelRows) {
    gemv_packed_panel(job.packed + row * k_padded, k_padded, xb, job.m, job.y + row, job.n,
                      std::min(kPanelRows, job.n - row));
  }
}

}  // namespace mlaserve::kernels
