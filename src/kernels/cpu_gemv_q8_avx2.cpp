// The 8-bit GEMV (FP8 e4m3 with 128x128 block scales, INT8 with a scale per row) on CPUs with
// AVX2 but not the AVX-512 BF16/VBMI kernel (AMD Zen 2/3, Intel Haswell to Comet Lake,
// Skylake-X): without it such a CPU would dequantize every decode step's FP8 weights (a
// DeepSeek-V3 or V4 checkpoint as released) into float32 panels for oneDNN, per call. Eight codes
// at a time are widened to int32 and turned into their float32 values by bit arithmetic, exact
// for every code: FP8's exponent and mantissa moved into a float's and rebiased (a subnormal's
// mantissa scaled instead, so that no float32 subnormal is formed), INT8's magnitude converted and
// its sign bit set. x is rounded to bf16 as the model's bf16 activations are; each block's sums
// are scaled once. One summation order per row whatever the batch (the deterministic kernels).
#include <immintrin.h>

#include <algorithm>

#include "kernels/avx2_util.h"
#include "kernels/cpu_isa.h"
#include "kernels/gemv.h"

namespace mlaserve::kernels {
namespace {

constexpr int kMaxXRows = 4;  // x rows per pass over a weight row

// The values of 8 codes (bytes) of `type`.
template <WeightType kType>
MLASERVE_AVX2 inline __m256 decode8(const uint8_t* codes) {
  const __m256i v = _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(codes)));
  const __m256i sign = _mm256_slli_epi32(_mm256_and_si256(v, _mm256_set1_epi32(0x80)), 24);
  if constexpr (kType == WeightType::INT8) {
    const __m256 magnitude = _mm256_cvtepi32_ps(_mm256_and_si256(v, _mm256_set1_epi32(0x7f)));
    return _mm256_or_ps(magnitude, _mm256_castsi256_ps(sign));
  }
  // e4m3: 2^(e - 7) (1 + m / 8) for e > 0: e and m into a float's fields, the bias 127 - 7
  // added; m · 2^-9 for e = 0.
  const __m256i em = _mm256_and_si256(v, _mm256_set1_epi32(0x7f));
  const __m256 normal = _mm256_castsi256_ps(
      _mm256_add_epi32(_mm256_slli_epi32(em, 20), _mm256_set1_epi32(120 << 23)));
  const __m256 subnormal = _mm256_mul_ps(_mm256_cvtepi32_ps(em), _mm256_set1_ps(1.0f / 512));
  const __m256 is_subnormal = _mm256_castsi256_ps(
      _mm256_cmpeq_epi32(_mm256_and_si256(v, _mm256_set1_epi32(0x78)), _mm256_setzero_si256()));
  return _mm256_or_ps(_mm256_blendv_ps(normal, subnormal, is_subnormal), _mm256_castsi256_ps(sign));
}

// y[i * n] = x[i, :k] · row for i < kM (x rows k floats apart), block by block of the row's
// scales.
template <WeightType kType, int kM>
MLASERVE_AVX2 void row_q8(const float* x, const uint8_t* codes, const BlockScales& s, int64_t row,
                          int64_t k, float* y, int64_t n) {
  __m256 acc[kM];
  float tail[kM] = {};
  for (int i = 0; i < kM; ++i) acc[i] = _mm256_setzero_ps();
  for (int64_t j = 0; j < s.col_blocks; ++j) {
    const int64_t begin = s.block_begin(j), end = s.block_end(j, k);
    // Two chains per x row (even and odd 8-column steps), whatever kM: FMA latency hidden, and a
    // row's summation order still the same in any batch.
    __m256 sum[kM][2];
    float rest[kM] = {};
    for (int i = 0; i < kM; ++i) sum[i][0] = sum[i][1] = _mm256_setzero_ps();
    int64_t c = begin;
    for (; c + 16 <= end; c += 16) {
      const __m256 w0 = decode8<kType>(codes + c), w1 = decode8<kType>(codes + c + 8);
      for (int i = 0; i < kM; ++i) {
        sum[i][0] = _mm256_fmadd_ps(w0, _mm256_loadu_ps(x + i * k + c), sum[i][0]);
        sum[i][1] = _mm256_fmadd_ps(w1, _mm256_loadu_ps(x + i * k + c + 8), sum[i][1]);
      }
    }
    for (; c + 8 <= end; c += 8) {
      const __m256 w = decode8<kType>(codes + c);
      for (int i = 0; i < kM; ++i)
        sum[i][0] = _mm256_fmadd_ps(w, _mm256_loadu_ps(x + i * k + c), sum[i][0]);
    }
    for (; c < end; ++c) {
      const float w = code_value(kType, codes[c]);
      for (int i = 0; i < kM; ++i) rest[i] += w * x[i * k + c];
    }
    const float scale = s.scale(row, j);
    for (int i = 0; i < kM; ++i) {
      acc[i] = _mm256_fmadd_ps(_mm256_add_ps(sum[i][0], sum[i][1]), _mm256_set1_ps(scale), acc[i]);
      tail[i] += rest[i] * scale;
    }
  }
  for (int i = 0; i < kM; ++i) y[i * n] = hsum8(acc[i]) + tail[i];
}

template <WeightType kType>
void rows_q8(const GemvJob& job, const float* x, int64_t first, int64_t last) {
  const int64_t k = job.k;
  for (int64_t r = first; r < last; ++r) {
    const uint8_t* codes = static_cast<const uint8_t*>(job.w) + r * k;
    for (int64_t i = 0; i < job.m; i += kMaxXRows) {
      const float* xi = x + i * k;
      float* y = job.y + i * job.n + r;
      switch (std::min<int64_t>(kMaxXRows, job.m - i)) {
        case 4:
          row_q8<kType, 4>(xi, codes, *job.scales, r, k, y, job.n);
          break;
        case 3:
          row_q8<kType, 3>(xi, codes, *job.scales, r, k, y, job.n);
          break;
        case 2:
          row_q8<kType, 2>(xi, codes, *job.scales, r, k, y, job.n);
          break;
        default:
          row_q8<kType, 1>(xi, codes, *job.scales, r, k, y, job.n);
      }
    }
  }
}

}  // namespace

void gemv_q8_avx2_rows(const GemvJob& job, int64_t first, int64_t last) {
  const float* x = bf16_rounded(job.x, job.m * job.k);  // the bf16 activations x stands for
  if (job.type == WeightType::FP8) {
    rows_q8<WeightType::FP8>(job, x, first, last);
  } else {
    rows_q8<WeightType::INT8>(job, x, first, last);
  }
}

}  // namespace mlaserve::kernels
