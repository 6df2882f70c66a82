// AVX-512 GEMV for small m. Each pass computes a tile of kRows weight rows × kM x rows with
// kRows·kM named accumulators (fully unrolled constant-index arrays, which g++ keeps in
// registers), so every weight vector loaded from memory serves kM rows of x and every x vector
// serves kRows weight rows. Threads split the weight rows into contiguous ranges, so each core
// streams its own part of W once.
#include <algorithm>
#include <vector>

#include "core/scratch.h"
#include "kernels/avx512_util.h"
#include "kernels/gemv.h"
#include "kernels/parallel.h"
#include "kernels/weight_buffer.h"

namespace mlaserve::kernels {
namespace {

// Weight rows and x rows per pass: up to 8 × 3 = 24 accumulators + 3 x vectors + 1 weight
// vector fit the 32 zmm registers. Eight rows are eight concurrent DRAM streams, which at
// m = 1..2 streamed W 5-15 % faster than four rows did.
constexpr int kTileRows = 8;
constexpr int kTileM = 3;                      // larger m loops over groups of kTileM x rows
constexpr int64_t kMinParallelWork = 1 << 16;  // elements below which one thread is faster
// Weight bytes of a gemv_batch below which one thread is faster: while the pool's threads spin
// (back-to-back decode ops) a parallel pass costs about a microsecond; after oneDNN ran they
// sleep, and waking one (~50 µs) only pays for weights that take longer than that to stream.
constexpr int64_t kMinParallelBytesAwake = 2 * kMinParallelWork;
constexpr int64_t kMinParallelBytesAsleep = 2 << 20;
// x rows up to which a product's time is its weight's stream (BM_CutOver: m = 1..6 take about
// as long as m = 1); past them it grows with m. So a job's weight bytes count
// max(m, kStreamRows) / kStreamRows times as work: for the thresholds above (a 1 MB expert at
// m = 32 computes for ~150 µs on one core) and for the threads' shares (at decode batch 32 a
// layer's experts see 1 to 15 rows each: equal shares of bytes left one thread waiting for the
// other at the end of every expert pass, ~5 % of a step).
constexpr int64_t kStreamRows = 6;
constexpr int64_t kXBlockBytes = 256 << 10;  // x rows per pass over the weights (run_rows)

// ---- Float32 x: F32 weights, and BF16 ones widened where vdpbf16ps is missing -------------

// 16 weights as float32 (a bf16 is the high half of its float32: widening is exact); the masked
// forms read zeros in the lanes off the mask.
MLASERVE_AVX512 inline __m512 load_weights(const float* p) {
  return _mm512_loadu_ps(p);
}
MLASERVE_AVX512 inline __m512 load_weights(const bf16* p) {
  return bf16_to_f32x16(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
}
MLASERVE_AVX512 inline __m512 load_weights(__mmask16 lanes, const float* p) {
  return _mm512_maskz_loadu_ps(lanes, p);
}
MLASERVE_AVX512 inline __m512 load_weights(__mmask16 lanes, const bf16* p) {
  return bf16_to_f32x16(_mm256_maskz_loadu_epi16(lanes, p));
}

// y[i * y_stride + r] = x[i, :k] · w[r, :k] for r < kRows, i < kM. x rows are k floats apart.
// `next` is the weight block the thread reads after this one: it is fetched into L2 in step,
// because with short rows (K = 1024: 2-4 KB) the hardware prefetcher has no time to ramp up
// on each new set of row streams.
template <typename W, int kRows, int kM>
MLASERVE_AVX512 void tile_f32(const float* x, const W* w, const W* next, int64_t k, float* y,
                              int64_t y_stride) {
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
      __m512 wv = load_weights(w + r * k + c);
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
      const __m512 wv = load_weights(tail, w + r * k + c);
#pragma GCC unroll 8
      for (int i = 0; i < kM; ++i) acc[r][i] = _mm512_fmadd_ps(wv, xv[i], acc[r][i]);
    }
  }
  store_tile_sums<kRows, kM>(acc, y, y_stride);
}

// All x rows against weight rows [row, row + rows), rows <= kTileRows.
template <typename W, int kRows>
MLASERVE_AVX512 void row_block_f32(const float* x, int64_t m, const W* w, int64_t n, int64_t k,
                                   int64_t row, float* y) {
  const W* w_rows = w + row * k;
  const W* next = row + kRows + kTileRows <= n ? w_rows + kRows * k : w_rows;
  int64_t i = 0;
  for (; i + kTileM <= m; i += kTileM)
    tile_f32<W, kRows, kTileM>(x + i * k, w_rows, next, k, y + i * n + row, n);
  switch (m - i) {
    case 1:
      tile_f32<W, kRows, 1>(x + i * k, w_rows, next, k, y + i * n + row, n);
      break;
    case 2:
      tile_f32<W, kRows, 2>(x + i * k, w_rows, next, k, y + i * n + row, n);
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
  store_tile_sums<kRows, kM>(acc, y, y_stride);
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

MLASERVE_AVX512_BF16 void round_row_to_bf16(const float* x, int64_t cols, int64_t padded_cols,
                                            bf16* out) {
  for (int64_t c = 0; c < padded_cols; c += 16) {
    const __mmask16 valid = first_lanes16(std::max<int64_t>(cols - c, 0));
    const __mmask16 inside = first_lanes16(padded_cols - c);
    const __m256bh rounded = _mm512_cvtneps_pbh(_mm512_maskz_loadu_ps(valid, x + c));
    _mm256_mask_storeu_epi16(out + c, inside, (__m256i)rounded);
  }
}

// Whether a job multiplies x rounded to bf16 (vdpbf16ps), not x as it is (F32 weights, BF16
// ones widened on a CPU without AVX512_BF16, quantized ones on the AVX2 kernels).
bool rounds_x(const GemvJob& job) {
  if (quantized_type(job.type)) return cpu_has_avx512_vbmi_bf16();
  return job.type == WeightType::BF16 && cpu_has_avx512_bf16();
}

// Weight rows [first, last) of a job with float32 x.
template <typename W>
void run_rows_f32(const GemvJob& job, int64_t first, int64_t last) {
  const auto* w = static_cast<const W*>(job.w);
  for (int64_t row = first; row < last; row += kTileRows) {
    if (row + kTileRows <= last) {
      row_block_f32<W, kTileRows>(job.x, job.m, w, job.n, job.k, row, job.y);
    } else {
      for (int64_t r = row; r < last; ++r)
        row_block_f32<W, 1>(job.x, job.m, w, job.n, job.k, r, job.y);
    }
  }
}

// Weight rows [first, last) of one job, x already rounded to bf16 in xb where rounds_x(job).
void run_rows_all_x(const GemvJob& job, const bf16* xb, int64_t k_padded, int64_t first,
                    int64_t last) {
  if (job.dequantized != nullptr) {
    gemv_dequantized_rows(job, xb, k_padded, first, last);
    return;
  }
  if (quantized_type(job.type) && !rounds_x(job)) {  // on a CPU without their AVX-512 GEMV
    four_bit(job.type) ? gemv_q4_avx2_rows(job, first, last) : gemv_q8_avx2_rows(job, first, last);
    return;
  }
  if (!cpu_has_avx512()) {  // only float32/bf16 jobs come here then (use_gemv)
    gemv_avx2_rows(job, first, last);
    return;
  }
  if (job.type == WeightType::FP8 || job.type == WeightType::INT8) {
    gemv_q8_rows(job, xb, k_padded, first, last);
    return;
  }
  if (four_bit(job.type)) {
    gemv_q4_rows(job, xb, k_padded, first, last);
    return;
  }
  if (job.packed != nullptr) {
    gemv_packed_rows(job, xb, k_padded, first, last);
    return;
  }
  if (job.type == WeightType::F32) {
    run_rows_f32<float>(job, first, last);
    return;
  }
  if (!rounds_x(job)) {
    run_rows_f32<bf16>(job, first, last);
    return;
  }
  const auto* w = static_cast<const bf16*>(job.w);
  for (int64_t row = first; row < last; row += kTileRows) {
    if (row + kTileRows <= last) {
      row_block_bf16<kTileRows>(xb, job.m, k_padded, w, job.n, job.k, row, job.y);
    } else {
      for (int64_t r = row; r < last; ++r)
        row_block_bf16<1>(xb, job.m, k_padded, w, job.n, job.k, r, job.y);
    }
  }
}

// As run_rows_all_x, for x in blocks of rows that stay in L2 while the thread's weight rows
// stream past each block once. Only the deterministic mode sends large m here (prefill); there,
// without blocking, every weight tile would re-read all of x from L3. Each output is still one
// tile's full-K sum: the blocking changes no result.
void run_rows(const GemvJob& job, const bf16* xb, int64_t k_padded, int64_t first, int64_t last) {
  // A dequantized job's blocks are made once for every x row, and AMX tiles take all of x in
  // passes over K of their own: no blocking of x (blocks of x re-read the weight once each).
  if (job.dequantized != nullptr || (job.packed != nullptr && packed_rows_on_amx(job.m)))
    return run_rows_all_x(job, xb, k_padded, first, last);
  const int64_t x_row_bytes = rounds_x(job) ? k_padded * 2 : job.k * 4;
  const int64_t block = std::max<int64_t>(kTileM, kXBlockBytes / x_row_bytes / kTileM * kTileM);
  for (int64_t i = 0; i < job.m; i += block) {
    GemvJob part = job;
    part.x = job.x + i * job.k;
    part.m = std::min(block, job.m - i);
    part.y = job.y + i * job.n;
    run_rows_all_x(part, rounds_x(job) ? xb + i * k_padded : xb, k_padded, first, last);
  }
}

int64_t padded_cols(const GemvJob& job) {
  return gemv_x_values(1, job.k);
}

int64_t row_bytes(const GemvJob& job) {
  switch (job.type) {
    case WeightType::F32:
      return job.k * 4;
    case WeightType::BF16:
      return job.k * 2;
    case WeightType::FP8:
    case WeightType::INT8:
      break;
    case WeightType::INT4:
    case WeightType::MXFP4:
      // k / 2 bytes, but decoding them costs about what streaming k bytes does, and the work
      // split (threads, thresholds) is about time.
      return job.k;
  }
  return job.k;
}

// A weight row's share of the work (see kStreamRows), in bytes times rows of x.
int64_t row_work(const GemvJob& job) {
  return row_bytes(job) * std::max(job.m, kStreamRows);
}

// The first row of a job at or after work position `pos` of the concatenated jobs, where the
// job's rows start at `start`; rounded up to whole tiles (panels of a packed copy), so that
// threads split a job only between them.
int64_t row_at(const GemvJob& job, int64_t start, int64_t pos) {
  if (pos <= start) return 0;
  const int64_t row = (pos - start + row_work(job) - 1) / row_work(job);
  const int64_t tile =
      job.packed != nullptr || job.dequantized != nullptr ? packed_panel_rows() : kTileRows;
  return std::min(job.n, (row + tile - 1) / tile * tile);
}

}  // namespace

void round_rows_to_bf16(const float* x, int64_t rows, int64_t cols, int64_t out_stride, bf16* out) {
  // Called before each oneDNN GEMM, when the pool's threads are parked: waking one (~50 µs)
  // costs more than rounding a few hundred thousand values alone.
  const int64_t min_parallel = parallel_threads_awake() ? kMinParallelWork : 16 * kMinParallelWork;
  for_ranges(rows, rows * cols >= min_parallel, [&](int64_t first, int64_t last) {
    for (int64_t r = first; r < last; ++r)
      round_row_to_bf16(x + r * cols, cols, out_stride, out + r * out_stride);
  });
}

namespace {
// On a huge page, as gemv_dequantized_rows' block beside it in L2.
thread_local WeightBuffer<bf16> t_rounded_x;
}  // namespace

bf16* rounded_x_scratch(int64_t values) {
  return take_huge(t_rounded_x, static_cast<size_t>(values));
}

void reserve_matmul_scratch(int64_t rows, int64_t cols) {
  rounded_x_scratch(gemv_x_values(rows, cols));  // >= the oneDNN path's rows * cols
}

size_t matmul_scratch_bytes() {
  return t_rounded_x.capacity() * sizeof(bf16);
}

int64_t gemv_x_values(int64_t rows, int64_t k) {
  return rows * ((k + 31) / 32 * 32);
}

void gemv_batch(std::span<const GemvJob> jobs) {
  // x of every BF16/FP8/INT8 job rounded once, zero-padded to whole 32-column chunks (no x tail
  // masks).
  thread_local std::vector<int64_t> offsets;
  offsets.assign(jobs.size() + 1, 0);
  for (size_t j = 0; j < jobs.size(); ++j) {
    offsets[j + 1] = offsets[j] + (rounds_x(jobs[j]) ? gemv_x_values(jobs[j].m, jobs[j].k) : 0);
  }
  bf16* rounded = rounded_x_scratch(offsets.back());
  int64_t work = 0;
  for (size_t j = 0; j < jobs.size(); ++j) {
    const GemvJob& job = jobs[j];
    if (rounds_x(job)) {
      for (int64_t i = 0; i < job.m; ++i) {
        round_row_to_bf16(job.x + i * job.k, job.k, padded_cols(job),
                          rounded + offsets[j] + i * padded_cols(job));
      }
    }
    work += job.n * row_work(job);
  }
  // Each thread takes one contiguous range of all jobs' weights, of equal work, so each core
  // streams its own share once whatever the mix of sizes.
  const bf16* xb = rounded;
  const int64_t* x_offsets = offsets.data();
  const bool parallel = work >= kStreamRows * (parallel_threads_awake() ? kMinParallelBytesAwake
                                                                        : kMinParallelBytesAsleep);
  on_threads(parallel, [&](int thread, int threads) {
    const int64_t begin = work * thread / threads, end = work * (thread + 1) / threads;
    int64_t start = 0;
    for (size_t j = 0; j < jobs.size() && start < end; ++j) {
      const GemvJob& job = jobs[j];
      const int64_t first = row_at(job, start, begin), last = row_at(job, start, end);
      if (first < last) run_rows(job, xb + x_offsets[j], padded_cols(job), first, last);
      start += job.n * row_work(job);
    }
  });
}

void gemv_f32(const float* x, int64_t m, const float* w, int64_t n, int64_t k, float* y) {
  const GemvJob job{x, m, w, WeightType::F32, n, k, y};
  gemv_batch({&job, 1});
}

void gemv_bf16(const float* x, int64_t m, const bf16* w, int64_t n, int64_t k, float* y) {
  const GemvJob job{x, m, w, WeightType::BF16, n, k, y};
  gemv_batch({&job, 1});
}

}  // namespace mlaserve::kernels
