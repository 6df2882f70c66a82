// GEMV on 4-bit weights (INT4, MXFP4) for small m, and their dequantization for the GEMM path.
// Decode streams the weights, so a 4-bit weight costs half the memory traffic of an 8-bit one,
// and twice the decode work per byte: the decode must stay within a few vector ops per 64 codes
// to keep up with the memory. A row is taken in chunks of 128 columns (64 bytes, one load):
// its low nibbles (the even columns) and high nibbles (the odd ones) masked out as bytes, each
// looked up as the high and the low byte of its bf16 value by vpshufb (a 16-entry table per
// 128-bit lane), and the bytes interleaved into bf16 words by vpunpck{l,h}bw: 11 ops per 128
// codes. The unpacks work within 128-bit lanes, so lane L of all four decoded vectors holds
// columns of the chunk's L-th 32 (one scale group at a group size of 32); x is rearranged alike
// once per call (split_x), so vdpbf16ps forms the exact products of bf16 x and the code values
// and one FMA per chunk applies each lane's group scale.
#include <algorithm>
#include <array>
#include <cstring>
#include <vector>

#include "core/scratch.h"
#include "kernels/gemv.h"
#include "kernels/q4_decode.h"

namespace mlaserve::kernels {
namespace {

constexpr int64_t kPrefetchBytes = 16384;
constexpr int64_t kChunk = 128;  // columns per chunk, 64 bytes of codes

NibbleTable make_nibble_table(WeightType type) {
  alignas(64) std::array<bf16, 32> values;
  for (int code = 0; code < 32; ++code)
    values[static_cast<size_t>(code)] =
        f32_to_bf16(code_value(type, static_cast<uint8_t>(code % 16)));
  NibbleTable table;
  std::memcpy(&table.values, values.data(), 64);
  return table;
}

// The high and the low bytes of the 16 code values' bf16 bits, in every 128-bit lane.
struct ByteTables {
  __m512i high, low;
};

MLASERVE_AVX512 ByteTables byte_tables(WeightType type) {
  alignas(16) uint8_t high[16], low[16];
  for (int code = 0; code < 16; ++code) {
    const bf16 v = f32_to_bf16(code_value(type, static_cast<uint8_t>(code)));
    high[code] = static_cast<uint8_t>(v >> 8);
    low[code] = static_cast<uint8_t>(v & 0xff);
  }
  return {_mm512_broadcast_i32x4(_mm_load_si128(reinterpret_cast<const __m128i*>(high))),
          _mm512_broadcast_i32x4(_mm_load_si128(reinterpret_cast<const __m128i*>(low)))};
}

int64_t chunks_per_row(int64_t k) {
  return (k + kChunk - 1) / kChunk;
}

// Codes (bytes, < 16) to bf16: `first` holds codes 0-7 of each 128-bit lane, `second` 8-15.
MLASERVE_AVX512 inline void decode_bytes(__m512i codes, const ByteTables& t, __m512i& first,
                                         __m512i& second) {
  const __m512i high = _mm512_shuffle_epi8(t.high, codes);
  const __m512i low = _mm512_shuffle_epi8(t.low, codes);
  first = _mm512_unpacklo_epi8(low, high);
  second = _mm512_unpackhi_epi8(low, high);
}

// The 128 columns of a chunk from 64 bytes of codes, as four vectors of 32 bf16: lane L of
// v[0] holds columns 32L + 2j (j < 8), of v[1] 32L + 16 + 2j, of v[2] 32L + 2j + 1, of v[3]
// 32L + 17 + 2j.
MLASERVE_AVX512 inline void decode_chunk(__m512i bytes, const ByteTables& t, __m512i (&v)[4]) {
  const __m512i nibble = _mm512_set1_epi8(0x0f);
  decode_bytes(_mm512_and_si512(bytes, nibble), t, v[0], v[1]);
  decode_bytes(_mm512_and_si512(_mm512_srli_epi16(bytes, 4), nibble), t, v[2], v[3]);
}

// x rows (bf16, k_padded apart, zero past k) in decode_chunk's order: chunk q of row i at out +
// i * stride + 128 q as v[0..3]'s columns. Each 32 columns are permuted so that their 128-bit
// lane t holds v[t]'s part, then the four 32s' lanes are transposed.
MLASERVE_AVX512 void split_x(const bf16* xb, int64_t m, int64_t k_padded, int64_t k, int64_t stride,
                             bf16* out) {
  alignas(64) int16_t order[32];
  for (int16_t j = 0; j < 8; ++j) {
    order[j] = static_cast<int16_t>(2 * j);
    order[8 + j] = static_cast<int16_t>(16 + 2 * j);
    order[16 + j] = static_cast<int16_t>(2 * j + 1);
    order[24 + j] = static_cast<int16_t>(17 + 2 * j);
  }
  const __m512i index = _mm512_load_si512(order);
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t c = 0; c < k; c += kChunk) {
      const bf16* x = xb + i * k_padded + c;
      __m512i p[4];
      for (int l = 0; l < 4; ++l) {
        const int64_t valid = std::clamp<int64_t>(k_padded - c - 32 * l, 0, 32);
        p[l] = _mm512_permutexvar_epi16(index,
                                        _mm512_maskz_loadu_epi16(first_lanes32(valid), x + 32 * l));
      }
      const __m512i p01_lo = _mm512_shuffle_i64x2(p[0], p[1], 0x44);
      const __m512i p01_hi = _mm512_shuffle_i64x2(p[0], p[1], 0xEE);
      const __m512i p23_lo = _mm512_shuffle_i64x2(p[2], p[3], 0x44);
      const __m512i p23_hi = _mm512_shuffle_i64x2(p[2], p[3], 0xEE);
      bf16* chunk = out + i * stride + c;
      _mm512_storeu_si512(chunk, _mm512_shuffle_i64x2(p01_lo, p23_lo, 0x88));
      _mm512_storeu_si512(chunk + 32, _mm512_shuffle_i64x2(p01_lo, p23_lo, 0xDD));
      _mm512_storeu_si512(chunk + 64, _mm512_shuffle_i64x2(p01_hi, p23_hi, 0x88));
      _mm512_storeu_si512(chunk + 96, _mm512_shuffle_i64x2(p01_hi, p23_hi, 0xDD));
    }
  }
}

// How the scale groups of a row fall on a chunk's four 32-column lanes: lane L's scale is
// group 128q / group + lane_group[L] (groups are 32, 64 or a multiple of 128 columns).
struct ChunkScales {
  __m512i lane_index;        // lane_group of each f32 lane's 32s
  int64_t groups_per_chunk;  // 4, 2 or 1: scales a chunk reads
  int64_t group, groups;     // columns per group; groups per row
};

ChunkScales chunk_scales_of(const BlockScales& s) {
  alignas(64) int32_t index[16];
  for (int lane = 0; lane < 16; ++lane)
    index[lane] = static_cast<int32_t>(32 * (lane / 4) / s.col_block);
  ChunkScales c{};
  std::memcpy(&c.lane_index, index, 64);
  c.groups_per_chunk = std::max<int64_t>(1, kChunk / s.col_block);
  c.group = s.col_block;
  c.groups = s.col_blocks;
  return c;
}

struct Q4Rows {
  const uint8_t* w;     // the tile's first weight row
  const uint8_t* next;  // rows to fetch into L2 meanwhile
  int64_t row_bytes;    // k / 2
  const BlockScales* s;
  int64_t row;       // index of the first weight row (for its scales)
  int64_t next_row;  // index of the row at `next`
};

// A row's scales as the tile reads them: float32 (INT4), or E8M0 bytes (MXFP4, kExponents).
template <bool kExponents>
const uint8_t* scale_row(const BlockScales& s, int64_t row) {
  if constexpr (kExponents) return s.row_exponents(row);
  return reinterpret_cast<const uint8_t*>(s.row_scales(row));
}

// Up to four group scales of a chunk, from `first_group` of a scale row.
template <bool kExponents>
MLASERVE_AVX512 inline __m128 chunk_group_scales(const uint8_t* row, int64_t first_group,
                                                 __mmask8 groups) {
  if constexpr (kExponents) {  // 2^(e - 127): e in a float's exponent field
    const __m128i e =
        _mm_cvtepu8_epi32(_mm_maskz_loadu_epi8(static_cast<__mmask16>(groups), row + first_group));
    return _mm_castsi128_ps(_mm_slli_epi32(e, 23));
  }
  return _mm_maskz_loadu_ps(groups, reinterpret_cast<const float*>(row) + first_group);
}

// y[i * y_stride + r] = x[i] · W[row + r] for r < kRows, i < kM, x in split_x()'s form. Each
// chunk's decoded rows are multiplied with every x row, then scaled into the totals.
template <int kRows, int kM, bool kExponents>
MLASERVE_AVX512_BF16 void tile_q4(const bf16* x, int64_t x_stride, const Q4Rows& rows, int64_t k,
                                  const ByteTables& byte_tables, const ChunkScales& scales,
                                  float* y, int64_t y_stride) {
  __m512 total[kRows][kM];
  // The scales are a stream of their own beside each code row (an eighth of its bytes at groups
  // of 32 in float32, a thirty-second as E8M0): fetched ahead like the codes, or every fourth
  // chunk waits for DRAM.
  constexpr int64_t kScaleBytes = kExponents ? 1 : 4;
  const uint8_t *scale_rows[kRows], *next_scale_rows[kRows];
#pragma GCC unroll 8
  for (int r = 0; r < kRows; ++r) {
    scale_rows[r] = scale_row<kExponents>(*rows.s, rows.row + r);
    next_scale_rows[r] = scale_row<kExponents>(*rows.s, rows.next_row + r);
#pragma GCC unroll 8
    for (int i = 0; i < kM; ++i) total[r][i] = _mm512_setzero_ps();
  }
  const ByteTables tables = byte_tables;  // in registers
  const int64_t chunks = chunks_per_row(k);
  for (int64_t q = 0; q < chunks; ++q) {
    const int64_t byte = 64 * q, first_group = kChunk * q / scales.group;
    const __mmask64 lanes = first_lanes64(rows.row_bytes - byte);
    const auto groups = static_cast<__mmask8>(
        (1u << std::min(scales.groups_per_chunk, scales.groups - first_group)) - 1u);
#pragma GCC unroll 8
    for (int r = 0; r < kRows; ++r) {
      _mm_prefetch(rows.next + r * rows.row_bytes + byte, _MM_HINT_T1);
      _mm_prefetch(next_scale_rows[r] + first_group * kScaleBytes, _MM_HINT_T1);
      __m512i v[4];
      decode_chunk(_mm512_maskz_loadu_epi8(lanes, rows.w + r * rows.row_bytes + byte), tables, v);
      const __m512 scale = _mm512_permutexvar_ps(
          scales.lane_index, _mm512_castps128_ps512(chunk_group_scales<kExponents>(
                                 scale_rows[r], first_group, groups)));
#pragma GCC unroll 8
      for (int i = 0; i < kM; ++i) {
        const bf16* xi = x + i * x_stride + kChunk * q;
        __m512 sum = _mm512_setzero_ps();
#pragma GCC unroll 4
        for (int t = 0; t < 4; ++t)
          sum = _mm512_dpbf16_ps(sum, (__m512bh)v[t], (__m512bh)_mm512_loadu_si512(xi + 32 * t));
        total[r][i] = _mm512_fmadd_ps(sum, scale, total[r][i]);
      }
    }
  }
  store_tile_sums<kRows, kM>(total, y, y_stride);
}

// Weight rows [row, row + rows) against every x row (x in split_x()'s form): groups of up to
// four x rows 4 weight rows at a time, a lone x row 8 at a time, as the 8-bit GEMV does.
template <bool kExponents>
MLASERVE_AVX512_BF16 void row_block_q4(const GemvJob& job, const bf16* x, int64_t x_stride,
                                       int64_t row, int64_t rows, const ByteTables& tables,
                                       const ChunkScales& scales) {
  const int64_t row_bytes = job.k / 2;
  const auto* w = static_cast<const uint8_t*>(job.w) + row * row_bytes;
  const int64_t ahead = std::max<int64_t>(8, (kPrefetchBytes / row_bytes + 7) / 8 * 8);
  const int64_t next_row = row + ahead + 8 <= job.n ? row + ahead : row;
  const uint8_t* next = w + (next_row - row) * row_bytes;
  const Q4Rows all{w, next, row_bytes, job.scales, row, next_row};
  const Q4Rows upper{w + 4 * row_bytes, next + 4 * row_bytes, row_bytes, job.scales,
                     row + 4,           next_row + 4};
  for (int64_t i = 0; i < job.m;) {
    const bf16* xi = x + i * x_stride;
    float* y = job.y + i * job.n + row;
    const int64_t left = job.m - i;
    if (rows == 8 && left >= 4) {
      tile_q4<4, 4, kExponents>(xi, x_stride, all, job.k, tables, scales, y, job.n);
      tile_q4<4, 4, kExponents>(xi, x_stride, upper, job.k, tables, scales, y + 4, job.n);
      i += 4;
    } else if (rows == 8 && left >= 2) {
      tile_q4<4, 2, kExponents>(xi, x_stride, all, job.k, tables, scales, y, job.n);
      tile_q4<4, 2, kExponents>(xi, x_stride, upper, job.k, tables, scales, y + 4, job.n);
      i += 2;
    } else if (rows == 8) {
      tile_q4<8, 1, kExponents>(xi, x_stride, all, job.k, tables, scales, y, job.n);
      i += 1;
    } else {
      for (int64_t r = 0; r < rows; ++r) {
        const Q4Rows one{w + r * row_bytes, w + r * row_bytes, row_bytes,
                         job.scales,        row + r,           row + r};
        tile_q4<1, 1, kExponents>(xi, x_stride, one, job.k, tables, scales, y + r, job.n);
      }
      i += 1;
    }
  }
}

}  // namespace

const NibbleTable& nibble_table(WeightType type) {
  static const NibbleTable int4 = make_nibble_table(WeightType::INT4);
  static const NibbleTable mxfp4 = make_nibble_table(WeightType::MXFP4);
  return type == WeightType::INT4 ? int4 : mxfp4;
}

void gemv_q4_rows(const GemvJob& job, const bf16* xb, int64_t k_padded, int64_t first,
                  int64_t last) {
  static const ByteTables int4 = byte_tables(WeightType::INT4);
  static const ByteTables mxfp4 = byte_tables(WeightType::MXFP4);
  const ByteTables& tables = job.type == WeightType::INT4 ? int4 : mxfp4;
  const ChunkScales scales = chunk_scales_of(*job.scales);
  thread_local std::vector<bf16> split;
  const int64_t x_stride = kChunk * chunks_per_row(job.k);
  bf16* x = take(split, job.m * x_stride);
  split_x(xb, job.m, k_padded, job.k, x_stride, x);
  for (int64_t row = first; row < last; row += 8) {
    const int64_t rows = std::min<int64_t>(8, last - row);
    if (job.scales->by_exponent) {
      row_block_q4<true>(job, x, x_stride, row, rows, tables, scales);
    } else {
      row_block_q4<false>(job, x, x_stride, row, rows, tables, scales);
    }
  }
}

// Rows [first, last) of a 4-bit weight as values, 32 columns at a time.
MLASERVE_AVX512_BF16 void dequantize_q4_rows_bf16(const Weight& w, int64_t first, int64_t last,
                                                  bf16* out) {
  const NibbleTable& table = nibble_table(w.type());
  const BlockScales& s = w.scales();
  const int64_t k = w.cols();
  thread_local std::vector<float> scratch;  // a row's MXFP4 scales as floats
  for (int64_t r = first; r < last; ++r) {
    const uint8_t* codes = w.codes() + r * w.code_row_bytes();
    const float* scales = s.row_values(r, scratch);
    bf16* row = out + (r - first) * k;
    for (int64_t c = 0; c < k; c += 32) {
      const int64_t n = std::min<int64_t>(32, k - c);
      const __m512i v = decode_nibbles32(codes + c / 2, n, table);
      const __m512 scale = _mm512_set1_ps(scales[c / s.col_block]);
      const __m512 lo = _mm512_mul_ps(bf16_to_f32x16(_mm512_castsi512_si256(v)), scale);
      const __m512 hi = _mm512_mul_ps(bf16_to_f32x16(_mm512_extracti64x4_epi64(v, 1)), scale);
      _mm512_mask_storeu_epi16(row + c, first_lanes32(n), (__m512i)_mm512_cvtne2ps_pbh(hi, lo));
    }
  }
}

void dequantize_q4_rows_f32(const Weight& w, int64_t first, int64_t last, float* out) {
  if (cpu_has_avx2()) return dequantize_q4_rows_f32_avx2(w, first, last, out);
  std::array<float, 16> values;
  for (int code = 0; code < 16; ++code)
    values[static_cast<size_t>(code)] = code_value(w.type(), static_cast<uint8_t>(code));
  const BlockScales& s = w.scales();
  thread_local std::vector<float> scratch;  // a row's MXFP4 scales as floats
  for (int64_t r = first; r < last; ++r) {
    const uint8_t* codes = w.codes() + r * w.code_row_bytes();
    const float* scales = s.row_values(r, scratch);
    float* row = out + (r - first) * w.cols();
    for (int64_t c = 0; c < w.cols(); ++c)
      row[c] = values[nibble(codes, c)] * scales[c / s.col_block];
  }
}

}  // namespace mlaserve::kernels
