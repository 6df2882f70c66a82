// The 4-bit GEMV (INT4, MXFP4) on CPUs with AVX2 but not the AVX-512 BF16/VBMI kernel (AMD Zen
// 2/3, Intel Haswell to Comet Lake, Skylake-X): without it such a CPU would dequantize every
// decode step's 4-bit weights into float32 panels for oneDNN, per call. Each 32-column chunk of
// a weight row is decoded once into eight-lane registers and used for every x row: its 16 code
// bytes split into nibbles in column order, looked up as int8 values by pshufb (INT4: q - 8;
// MXFP4: twice the e2m1 value, so that every value is a whole number), widened to float32. The
// products with x (rounded to bf16, as the model's bf16 activations are everywhere) are exact;
// a group's sums are scaled once (MXFP4's scale halved for the doubled values). The same decode
// fills the float32 panels of the 4-bit GEMM on any CPU (dequantize_q4_rows_f32).
#include <immintrin.h>

#include <algorithm>
#include <array>
#include <vector>

#include "core/numeric.h"
#include "core/scratch.h"
#include "kernels/avx2_util.h"
#include "kernels/cpu_isa.h"
#include "kernels/gemv.h"

namespace mlaserve::kernels {
namespace {

constexpr int kMaxXRows = 4;  // x rows per pass over a weight row (the decode's reuse)

// The int8 value of each code, and what a group's scale is multiplied by to undo the doubling.
struct CodeTable {
  std::array<int8_t, 16> values;
  float scale_factor;
};

CodeTable code_table(WeightType type) {
  CodeTable t{};
  const bool doubled = type == WeightType::MXFP4;
  for (int code = 0; code < 16; ++code) {
    const float v = code_value(type, static_cast<uint8_t>(code)) * (doubled ? 2.0f : 1.0f);
    t.values[static_cast<size_t>(code)] = static_cast<int8_t>(v);
  }
  t.scale_factor = doubled ? 0.5f : 1.0f;
  return t;
}

MLASERVE_AVX2 inline __m256 widen(__m128i bytes) {
  return _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(bytes));
}

// The 32 codes of 16 bytes (the even column in the low nibble) as values, in column order.
MLASERVE_AVX2 inline void decode32(const uint8_t* codes, __m128i table, __m256 w[4]) {
  const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(codes));
  const __m128i low_nibbles = _mm_set1_epi8(0x0f);
  const __m128i lo = _mm_and_si128(v, low_nibbles);
  const __m128i hi = _mm_and_si128(_mm_srli_epi16(v, 4), low_nibbles);
  const __m128i first = _mm_shuffle_epi8(table, _mm_unpacklo_epi8(lo, hi));   // columns 0-15
  const __m128i second = _mm_shuffle_epi8(table, _mm_unpackhi_epi8(lo, hi));  // 16-31
  w[0] = widen(first);
  w[1] = widen(_mm_srli_si128(first, 8));
  w[2] = widen(second);
  w[3] = widen(_mm_srli_si128(second, 8));
}

// y[i * n] = x[i, :k] · row for i < m (x rows k floats apart). A row's sum is formed in one order
// whatever m, so that its result does not depend on the batch (the deterministic kernels).
// One summation order per row whatever kM (no extra chains for few x rows): the deterministic
// kernels need a row's result independent of the batch.
template <int kM>
MLASERVE_AVX2 void row_q4(const float* x, const uint8_t* codes, const float* scales, int64_t group,
                          int64_t k, const CodeTable& t, float* y, int64_t n) {
  const __m128i table = _mm_loadu_si128(reinterpret_cast<const __m128i*>(t.values.data()));
  __m256 acc[kM], sum[kM];
  for (int i = 0; i < kM; ++i) acc[i] = sum[i] = _mm256_setzero_ps();
  const int64_t whole = k / 32 * 32;
  __m256 w[4];
  for (int64_t c = 0; c < whole; c += 32) {
    decode32(codes + c / 2, table, w);
    for (int i = 0; i < kM; ++i) {
      const float* xc = x + i * k + c;
      for (int j = 0; j < 4; ++j)
        sum[i] = _mm256_fmadd_ps(w[j], _mm256_loadu_ps(xc + 8 * j), sum[i]);
    }
    if ((c + 32) % group != 0 && c + 32 < whole) continue;  // the group goes on
    const __m256 scale = _mm256_set1_ps(scales[c / group] * t.scale_factor);
    for (int i = 0; i < kM; ++i) {
      acc[i] = _mm256_fmadd_ps(sum[i], scale, acc[i]);
      sum[i] = _mm256_setzero_ps();
    }
  }
  for (int i = 0; i < kM; ++i) {
    float total = hsum8(acc[i]);
    // A last chunk of fewer than 32 columns (an even count), in its group.
    float tail = 0;
    for (int64_t c = whole; c < k; ++c) {
      const uint8_t code = nibble(codes, c);
      tail += static_cast<float>(t.values[code]) * x[i * k + c];
    }
    if (whole < k) total += tail * scales[whole / group] * t.scale_factor;
    y[i * n] = total;
  }
}

// A row of k values (code value x its group's scale) into out.
MLASERVE_AVX2 void decode_row_f32(const uint8_t* codes, const float* scales, int64_t group,
                                  int64_t k, int64_t whole, const CodeTable& t, float* out) {
  const __m128i table = _mm_loadu_si128(reinterpret_cast<const __m128i*>(t.values.data()));
  __m256 w[4];
  for (int64_t c = 0; c < whole; c += 32) {
    decode32(codes + c / 2, table, w);
    const __m256 scale = _mm256_set1_ps(scales[c / group] * t.scale_factor);
    for (int j = 0; j < 4; ++j) _mm256_storeu_ps(out + c + 8 * j, _mm256_mul_ps(w[j], scale));
  }
  for (int64_t c = whole; c < k; ++c)
    out[c] = static_cast<float>(t.values[nibble(codes, c)]) * (scales[c / group] * t.scale_factor);
}

}  // namespace

void dequantize_q4_rows_f32_avx2(const Weight& w, int64_t first, int64_t last, float* out) {
  const CodeTable t = code_table(w.type());
  const BlockScales& s = w.scales();
  const int64_t k = w.cols(), whole = k / 32 * 32;
  thread_local std::vector<float> scratch;  // a row's MXFP4 scales as floats
  for (int64_t r = first; r < last; ++r) {
    const uint8_t* codes = w.codes() + r * w.code_row_bytes();
    const float* scales = s.row_values(r, scratch);
    float* row = out + (r - first) * k;
    decode_row_f32(codes, scales, s.col_block, k, whole, t, row);
  }
}

void gemv_q4_avx2_rows(const GemvJob& job, int64_t first, int64_t last) {
  const CodeTable table = code_table(job.type);
  const int64_t k = job.k, group = job.scales->col_block;
  const float* x = bf16_rounded(job.x, job.m * k);  // the bf16 activations x stands for
  const int64_t row_bytes = k / 2;
  thread_local std::vector<float> scale_scratch;  // a row's MXFP4 scales as floats
  for (int64_t r = first; r < last; ++r) {
    const uint8_t* codes = static_cast<const uint8_t*>(job.w) + r * row_bytes;
    const float* scales = job.scales->row_values(r, scale_scratch);
    for (int64_t i = 0; i < job.m; i += kMaxXRows) {
      const float* xi = x + i * k;
      float* y = job.y + i * job.n + r;
      switch (std::min<int64_t>(kMaxXRows, job.m - i)) {
        case 4:
          row_q4<4>(xi, codes, scales, group, k, table, y, job.n);
          break;
        case 3:
          row_q4<3>(xi, codes, scales, group, k, table, y, job.n);
          break;
        case 2:
          row_q4<2>(xi, codes, scales, group, k, table, y, job.n);
          break;
        default:
          row_q4<1>(xi, codes, scales, group, k, table, y, job.n);
      }
    }
  }
}

}  // namespace mlaserve::kernels
