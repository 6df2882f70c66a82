// GEMV on FP8/INT8 weights for small m, and their dequantization for the GEMM path. The codes
// are decoded to bf16 in registers as they stream in (q8_decode.h), multiplied with x (rounded
// to bf16 once, as for BF16 weights) by vdpbf16ps into one accumulator per scale block, and
// each block's sum is scaled when the block ends: the products are exact, and a weight costs
// one byte of memory traffic instead of two.
#include <algorithm>
#include <array>
#include <cstring>
#include <vector>

#include "core/scratch.h"
#include "kernels/gemv.h"
#include "kernels/q8_decode.h"

namespace mlaserve::kernels {
namespace {

constexpr int64_t kPrefetchBytes = 8192;

// A row's columns are taken in chunks of at most 64: each scale block j, [block_begin(j),
// block_end(j)), cut into 64s from its first column (blocks need not start at a multiple of 64:
// a tensor-parallel shard may begin inside one). The chunks of a row of k columns:
int64_t chunks_per_row(const BlockScales& s, int64_t k) {
  int64_t chunks = 0;
  for (int64_t j = 0; j < s.col_blocks; ++j)
    chunks += (s.block_end(j, k) - s.block_begin(j) + 63) / 64;
  return chunks;
}

// x rows (bf16, k_padded apart) rearranged for the tiles: row i's chunk q (in the order
// chunks_per_row counts them) at out + i * stride + 64 q, in decode_codes64's order and zero past
// the chunk's columns, so that a tile reads each x vector straight from L1 as it multiplies.
MLASERVE_AVX512_VBMI_BF16 void interleave_x(const bf16* xb, int64_t m, int64_t k_padded,
                                            const BlockScales& s, int64_t k, int64_t stride,
                                            bf16* out) {
  for (int64_t i = 0; i < m; ++i) {
    const bf16* row = xb + i * k_padded;
    bf16* chunk = out + i * stride;
    for (int64_t j = 0; j < s.col_blocks; ++j) {
      const int64_t end = s.block_end(j, k);
      for (int64_t c = s.block_begin(j); c < end; c += 64, chunk += 64) {
        const int64_t count = std::min<int64_t>(64, end - c);
        __m512bh first, second;
        interleave_like_codes(
            _mm512_maskz_loadu_epi16(first_lanes32(count), row + c),
            _mm512_maskz_loadu_epi16(first_lanes32(std::max<int64_t>(count - 32, 0)), row + c + 32),
            first, second);
        _mm512_storeu_si512(chunk, (__m512i)first);
        _mm512_storeu_si512(chunk + 32, (__m512i)second);
      }
    }
  }
}

// block[r][i] += x row i · decoded weight row r over the chunk of `count` <= 64 columns at c; x
// is the chunk in interleave_x()'s form (rows x_stride apart). Each weight row is decoded once
// for all kM x rows. The same columns of the rows at `next` (the thread's next block) are
// fetched into L2 meanwhile: an FP8 row of K = 1024 is 1 KB, too short for the hardware
// prefetcher to ramp up on each new set of 8 row streams (without it, K = 1024 weights
// streamed at half the rate of K = 7168).
template <int kRows, int kM>
MLASERVE_AVX512_VBMI_BF16 inline __attribute__((always_inline)) void accumulate(
    const bf16* x, int64_t x_stride, const uint8_t* w, const uint8_t* next, int64_t k, int64_t c,
    int64_t count, const ByteDecodeTable& table, __m512 (&block)[kRows][kM]) {
#pragma GCC unroll 8
  for (int r = 0; r < kRows; ++r) {
    _mm_prefetch(next + r * k + c, _MM_HINT_T1);
    const uint8_t* codes = w + r * k + c;
    __m512i first, second;
    decode_codes64(count >= 64 ? _mm512_loadu_si512(codes)
                               : _mm512_maskz_loadu_epi8(first_lanes64(count), codes),
                   table, first, second);
#pragma GCC unroll 8
    for (int i = 0; i < kM; ++i) {
      const bf16* xi = x + i * x_stride;
      block[r][i] =
          _mm512_dpbf16_ps(block[r][i], (__m512bh)first, (__m512bh)_mm512_loadu_si512(xi));
      block[r][i] =
          _mm512_dpbf16_ps(block[r][i], (__m512bh)second, (__m512bh)_mm512_loadu_si512(xi + 32));
    }
  }
}

// y[i * y_stride + r] = x[i] · W[row + r] for r < kRows, i < kM, x in interleave_x()'s form.
// Each scale block's sums are scaled into the totals when the block ends. In the inner loop
// live the kRows·kM block sums, two decoded vectors, the four table vectors and a constant; the
// totals, touched once per block, may stay in memory.
template <int kRows, int kM>
MLASERVE_AVX512_VBMI_BF16 void tile_q8(const bf16* x, int64_t x_stride, const uint8_t* w,
                                       const uint8_t* next, int64_t k, const BlockScales& s,
                                       int64_t row, const ByteDecodeTable& table, float* y,
                                       int64_t y_stride) {
  __m512 total[kRows][kM], block[kRows][kM];
#pragma GCC unroll 8
  for (int r = 0; r < kRows; ++r)
#pragma GCC unroll 8
    for (int i = 0; i < kM; ++i) total[r][i] = block[r][i] = _mm512_setzero_ps();
  const bf16* chunk = x;
  for (int64_t j = 0; j < s.col_blocks; ++j) {
    const int64_t end = s.block_end(j, k);
    for (int64_t c = s.block_begin(j); c < end; c += 64, chunk += 64)
      accumulate<kRows, kM>(chunk, x_stride, w, next, k, c, std::min<int64_t>(64, end - c), table,
                            block);
#pragma GCC unroll 8
    for (int r = 0; r < kRows; ++r) {
      const __m512 scale = _mm512_set1_ps(s.row_scales(row + r)[j]);
#pragma GCC unroll 8
      for (int i = 0; i < kM; ++i) {
        total[r][i] = _mm512_fmadd_ps(block[r][i], scale, total[r][i]);
        block[r][i] = _mm512_setzero_ps();
      }
    }
  }
  store_tile_sums<kRows, kM>(total, y, y_stride);
}

// Weight rows [row, row + 8) against kM x rows, as two tiles of 4 weight rows.
template <int kM>
MLASERVE_AVX512_VBMI_BF16 void tile_pair(const bf16* x, int64_t x_stride, const uint8_t* w,
                                         const uint8_t* next, int64_t k, const BlockScales& s,
                                         int64_t row, const ByteDecodeTable& table, float* y,
                                         int64_t y_stride) {
  tile_q8<4, kM>(x, x_stride, w, next, k, s, row, table, y, y_stride);
  tile_q8<4, kM>(x, x_stride, w + 4 * k, next + 4 * k, k, s, row + 4, table, y + 4, y_stride);
}

// Weight rows [row, row + rows) against every x row (x in interleave_x()'s form). Groups of up
// to four x rows go 4 weight rows at a time (the 8 rows of a thread's block are then read once
// per group, from L1/L2); a lone x row 8 weight rows at a time.
MLASERVE_AVX512_VBMI_BF16 void row_block_q8(const GemvJob& job, const bf16* x, int64_t x_stride,
                                            int64_t row, int64_t rows,
                                            const ByteDecodeTable& table) {
  const int64_t k = job.k;
  const uint8_t* w = static_cast<const uint8_t*>(job.w) + row * k;
  // Rows at least kPrefetchBytes ahead (whole 8-row blocks): with short rows (K = 384: 3 KB per
  // block) the next block is too near to arrive from DRAM in time.
  const int64_t ahead = std::max<int64_t>(8, (kPrefetchBytes / k + 7) / 8 * 8);
  const uint8_t* next = row + ahead + 8 <= job.n ? w + ahead * k : w;
  const BlockScales& s = *job.scales;
  for (int64_t i = 0; i < job.m;) {
    const bf16* xi = x + i * x_stride;
    float* y = job.y + i * job.n + row;
    const int64_t left = job.m - i;
    if (rows == 8 && left >= 4) {
      tile_pair<4>(xi, x_stride, w, next, k, s, row, table, y, job.n);
      i += 4;
    } else if (rows == 8 && left == 3) {
      tile_pair<3>(xi, x_stride, w, next, k, s, row, table, y, job.n);
      i += 3;
    } else if (rows == 8 && left == 2) {
      tile_pair<2>(xi, x_stride, w, next, k, s, row, table, y, job.n);
      i += 2;
    } else if (rows == 8) {
      tile_q8<8, 1>(xi, x_stride, w, next, k, s, row, table, y, job.n);
      i += 1;
    } else {
      for (int64_t r = 0; r < rows; ++r) {
        tile_q8<1, 1>(xi, x_stride, w + r * k, w + r * k, k, s, row + r, table, y + r, job.n);
      }
      i += 1;
    }
  }
}

DecodeTable make_table(WeightType type) {
  alignas(64) std::array<bf16, 128> magnitudes;
  for (int code = 0; code < 128; ++code)
    magnitudes[static_cast<size_t>(code)] =
        f32_to_bf16(code_value(type, static_cast<uint8_t>(code)));
  DecodeTable table;
  for (int part = 0; part < 4; ++part) {
    std::memcpy(&table.entries[part], magnitudes.data() + 32 * part, 64);
  }
  return table;
}

ByteDecodeTable make_byte_table(WeightType type) {
  alignas(64) std::array<uint8_t, 128> high, low;
  for (int code = 0; code < 128; ++code) {
    const bf16 magnitude = f32_to_bf16(code_value(type, static_cast<uint8_t>(code)));
    high[static_cast<size_t>(code)] = static_cast<uint8_t>(magnitude >> 8);
    low[static_cast<size_t>(code)] = static_cast<uint8_t>(magnitude & 0xff);
  }
  ByteDecodeTable table;
  for (int part = 0; part < 2; ++part) {
    std::memcpy(&table.high[part], high.data() + 64 * part, 64);
    std::memcpy(&table.low[part], low.data() + 64 * part, 64);
  }
  return table;
}

// One scaled block segment of a row, decoded and rounded: out[c] = bf16(value(code[c]) · scale).
MLASERVE_AVX512_BF16 void dequantize_segment(const uint8_t* codes, int64_t count, float scale,
                                             const DecodeTable& table, bf16* out) {
  const __m512 s = _mm512_set1_ps(scale);
  for (int64_t c = 0; c < count; c += 32) {
    const int64_t n = std::min<int64_t>(32, count - c);
    const __m512i v = decode_codes(load_codes(codes + c, n), table);
    const __m512 lo = bf16_to_f32x16(_mm512_castsi512_si256(v));
    const __m512 hi = bf16_to_f32x16(_mm512_extracti64x4_epi64(v, 1));
    const __m512bh scaled = _mm512_cvtne2ps_pbh(_mm512_mul_ps(hi, s), _mm512_mul_ps(lo, s));
    _mm512_mask_storeu_epi16(out + c, first_lanes32(n), (__m512i)scaled);
  }
}

}  // namespace

const ByteDecodeTable& byte_decode_table(WeightType type) {
  static const ByteDecodeTable fp8 = make_byte_table(WeightType::FP8);
  static const ByteDecodeTable int8 = make_byte_table(WeightType::INT8);
  return type == WeightType::FP8 ? fp8 : int8;
}

const DecodeTable& decode_table(WeightType type) {
  static const DecodeTable fp8 = make_table(WeightType::FP8);
  static const DecodeTable int8 = make_table(WeightType::INT8);
  return type == WeightType::FP8 ? fp8 : int8;
}

void gemv_q8_rows(const GemvJob& job, const bf16* xb, int64_t k_padded, int64_t first,
                  int64_t last) {
  const ByteDecodeTable& table = byte_decode_table(job.type);
  thread_local std::vector<bf16> interleaved;
  const int64_t x_stride = 64 * chunks_per_row(*job.scales, job.k);
  bf16* x = take(interleaved, job.m * x_stride);
  interleave_x(xb, job.m, k_padded, *job.scales, job.k, x_stride, x);
  for (int64_t row = first; row < last; row += 8) {
    row_block_q8(job, x, x_stride, row, std::min<int64_t>(8, last - row), table);
  }
}

namespace {

// segment(codes, count, scale, out) for every scale block of rows [first, last) of w, out
// pointing at the block's place in its row of `out` (rows w.cols() apart).
template <typename T, typename Segment>
void for_each_segment(const Weight& w, int64_t first, int64_t last, T* out, Segment segment) {
  const BlockScales& s = w.scales();
  for (int64_t r = first; r < last; ++r) {
    const uint8_t* codes = w.codes() + r * w.cols();
    T* row = out + (r - first) * w.cols();
    for (int64_t j = 0; j < s.col_blocks; ++j) {
      const int64_t begin = s.block_begin(j), end = s.block_end(j, w.cols());
      segment(codes + begin, end - begin, s.row_scales(r)[j], row + begin);
    }
  }
}

}  // namespace

void dequantize_rows_bf16(const Weight& w, int64_t first, int64_t last, bf16* out) {
  if (four_bit(w.type())) return dequantize_q4_rows_bf16(w, first, last, out);
  const DecodeTable& table = decode_table(w.type());
  for_each_segment(w, first, last, out,
                   [&table](const uint8_t* codes, int64_t count, float scale, bf16* o) {
                     dequantize_segment(codes, count, scale, table, o);
                   });
}

void dequantize_rows_f32(const Weight& w, int64_t first, int64_t last, float* out) {
  if (four_bit(w.type())) return dequantize_q4_rows_f32(w, first, last, out);
  std::array<float, 256> values;
  for (int code = 0; code < 256; ++code)
    values[static_cast<size_t>(code)] = code_value(w.type(), static_cast<uint8_t>(code));
  for_each_segment(w, first, last, out,
                   [&values](const uint8_t* codes, int64_t count, float scale, float* o) {
                     for (int64_t c = 0; c < count; ++c) o[c] = values[codes[c]] * scale;
                   });
}

}  // namespace mlaserve::kernels
