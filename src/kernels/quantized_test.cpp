// Quantized weights (FP8, INT8, INT4, MXFP4): the in-register decode against core/numeric.h /
// code_value on every code, and
// matmul's fast paths (GEMV for few rows, dequantized panels for many) against the scalar
// reference on random codes and scales, over shapes where a shard starts inside a 128-block
// (col_phase), fused weights restart their block rows, and rows and columns end mid-block.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "kernels/cpu_isa.h"
#include "kernels/deterministic_test_util.h"
#include "kernels/kernel_mode_test_util.h"
#include "kernels/ops.h"
#include "kernels/q4_decode.h"
#include "kernels/q8_decode.h"
#include "kernels/reference.h"

namespace mlaserve::kernels {
namespace {

MLASERVE_AVX512 std::vector<bf16> decode_all_codes(WeightType type) {
  std::vector<bf16> out(256);
  for (int first = 0; first < 256; first += 32) {
    std::vector<uint8_t> codes(32);
    for (int i = 0; i < 32; ++i) codes[static_cast<size_t>(i)] = static_cast<uint8_t>(first + i);
    const __m512i decoded = decode_codes(load_codes(codes.data(), 32), decode_table(type));
    _mm512_storeu_si512(out.data() + first, decoded);
  }
  return out;
}

// The GEMV's decode (decode_codes64), put back in code order: lane q of `first` holds code
// 16·(q / 8) + q % 8 of its 64, lane q of `second` that code + 8.
MLASERVE_AVX512_VBMI_BF16 std::vector<bf16> decode_all_codes64(WeightType type) {
  std::vector<bf16> out(256);
  for (int first = 0; first < 256; first += 64) {
    std::vector<uint8_t> codes(64);
    for (int i = 0; i < 64; ++i) codes[static_cast<size_t>(i)] = static_cast<uint8_t>(first + i);
    __m512i low_quads, high_quads;
    decode_codes64(_mm512_loadu_si512(codes.data()), byte_decode_table(type), low_quads,
                   high_quads);
    std::vector<bf16> lanes(64);
    _mm512_storeu_si512(lanes.data(), low_quads);
    _mm512_storeu_si512(lanes.data() + 32, high_quads);
    for (int q = 0; q < 32; ++q) {
      const int code = first + 16 * (q / 8) + q % 8;
      out[static_cast<size_t>(code)] = lanes[static_cast<size_t>(q)];
      out[static_cast<size_t>(code + 8)] = lanes[static_cast<size_t>(32 + q)];
    }
  }
  return out;
}

// Every code of `type` decoded to its exact value (NaN to a NaN, zeros with their sign).
void check_every_code(WeightType type, const std::vector<bf16>& decoded) {
  for (int code = 0; code < 256; ++code) {
    SCOPED_TRACE(testing::Message() << weight_type_name(type) << " code " << code);
    const float expected = type == WeightType::FP8 ? fp8_e4m3_to_f32(static_cast<uint8_t>(code))
                           : (code & 0x80) ? -static_cast<float>(code & 0x7f)  // sign-magnitude
                                           : static_cast<float>(code);
    const float actual = bf16_to_f32(decoded[static_cast<size_t>(code)]);
    if (std::isnan(expected)) {
      EXPECT_TRUE(std::isnan(actual));
    } else {
      EXPECT_EQ(actual, expected);
      EXPECT_EQ(std::signbit(actual), std::signbit(expected));
    }
  }
}

TEST(Quantized, EveryCodeDecodesExactly) {
  if (!cpu_has_avx512()) GTEST_SKIP() << "the decode kernel needs AVX-512 (F, BW)";
  for (bool gemv_decode : {false, true}) {
    if (gemv_decode && !cpu_has_avx512_vbmi_bf16()) continue;
    for (WeightType type : {WeightType::FP8, WeightType::INT8}) {
      const std::vector<bf16> decoded =
          gemv_decode ? decode_all_codes64(type) : decode_all_codes(type);
      check_every_code(type, decoded);
    }
  }
}

MLASERVE_AVX512 std::vector<bf16> decode_nibbles(const uint8_t* bytes, int64_t count,
                                                 WeightType type) {
  std::vector<bf16> lanes(32);
  _mm512_storeu_si512(lanes.data(), decode_nibbles32(bytes, count, nibble_table(type)));
  return lanes;
}

// Every 4-bit code decodes to its value: 0-7 INT4 -8..-1, e2m1 ±{0, 0.5, 1, 1.5, 2, 3, 4, 6}.
TEST(Quantized, EveryFourBitCodeDecodesExactly) {
  if (!cpu_has_avx512()) GTEST_SKIP() << "the decode kernel needs AVX-512 (F, BW)";
  const float mxfp4[16] = {0.0f,  0.5f,  1.0f,  1.5f,  2.0f,  3.0f,  4.0f,  6.0f,
                           -0.0f, -0.5f, -1.0f, -1.5f, -2.0f, -3.0f, -4.0f, -6.0f};
  // Bytes holding codes 0-15 twice (even column in the low nibble), decoded 30 at a time so
  // that the masked tail is exercised: lanes 30 and 31 must be +0.
  uint8_t bytes[16];
  for (int i = 0; i < 16; ++i)
    bytes[i] = static_cast<uint8_t>((2 * i) % 16 | ((2 * i + 1) % 16) << 4);
  for (WeightType type : {WeightType::INT4, WeightType::MXFP4}) {
    const std::vector<bf16> lanes = decode_nibbles(bytes, 30, type);
    for (int c = 0; c < 32; ++c) {
      SCOPED_TRACE(testing::Message() << weight_type_name(type) << " column " << c);
      const float value = bf16_to_f32(lanes[static_cast<size_t>(c)]);
      if (c >= 30) {
        EXPECT_EQ(lanes[static_cast<size_t>(c)], 0);
        continue;
      }
      const float expected =
          type == WeightType::INT4 ? static_cast<float>(c % 16 - 8) : mxfp4[c % 16];
      EXPECT_EQ(value, expected);
      EXPECT_EQ(std::signbit(value), std::signbit(expected));
      EXPECT_EQ(code_value(type, static_cast<uint8_t>(c % 16)), expected);
    }
  }
}

// How a random quantized weight's scales are laid out.
struct QuantizedCase {
  WeightType type;
  int64_t m, n, k;
  int64_t col_phase;  // FP8: where the shard starts inside its first 128-block
  int64_t fused_at;   // FP8: row where a second tensor's block rows start (0: none)
  int64_t group = 0;  // INT4/MXFP4: columns per scale
};

Weight random_quantized(const QuantizedCase& c, WeightType activations, uint32_t seed) {
  Weight w(c.type, c.n, c.k, activations);
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> code(0, 255);
  std::uniform_real_distribution<float> scale(0.25f, 2.0f);
  for (int64_t i = 0; i < c.n * w.code_row_bytes(); ++i) {
    auto v = static_cast<uint8_t>(code(rng));
    if ((v & 0x7f) == 0x7f && !four_bit(c.type)) v ^= 1;  // NaN in e4m3 (and unused in int8)
    w.codes()[i] = v;
  }
  BlockScales& s = w.scales();
  s.col_block = c.type == WeightType::FP8 ? 128 : four_bit(c.type) ? c.group : c.k;
  s.col_phase = c.col_phase;
  s.col_blocks = (c.k + c.col_phase + s.col_block - 1) / s.col_block;
  int32_t block_rows = 0;
  for (int64_t r = 0; r < c.n; ++r) {
    if (c.type != WeightType::FP8) {
      s.row_block[static_cast<size_t>(r)] = static_cast<int32_t>(r);
    } else {
      const int64_t local = r < c.fused_at || c.fused_at == 0 ? r : r - c.fused_at;
      const int64_t base = r < c.fused_at || c.fused_at == 0 ? 0 : (c.fused_at + 127) / 128;
      s.row_block[static_cast<size_t>(r)] = static_cast<int32_t>(base + local / 128);
    }
    block_rows = std::max(block_rows, s.row_block[static_cast<size_t>(r)] + 1);
  }
  s.resize(static_cast<size_t>(block_rows * s.col_blocks));
  for (size_t i = 0; i < s.blocks(); ++i) {
    const float v = scale(rng) / (c.type == WeightType::FP8 ? 64.0f : 32.0f);
    // MXFP4: power-of-two scales, as its E8M0 bytes hold them.
    s.set(i, c.type == WeightType::MXFP4 ? std::exp2(std::round(std::log2(v))) : v);
  }
  return w;
}

std::vector<float> random_x(int64_t count, uint32_t seed, bool round) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<float> x(static_cast<size_t>(count));
  for (float& v : x) v = round ? bf16_to_f32(f32_to_bf16(dist(rng))) : dist(rng);
  return x;
}

// Norm-wise relative error: max |a - e| over max |e|.
double relative_error(const std::vector<float>& actual, const std::vector<float>& expected) {
  double largest = 0.0, worst = 0.0;
  for (size_t i = 0; i < expected.size(); ++i) {
    largest = std::max(largest, std::abs(static_cast<double>(expected[i])));
    const double diff = std::abs(static_cast<double>(actual[i]) - expected[i]);
    worst = std::isnan(diff) ? INFINITY : std::max(worst, diff);
  }
  return largest > 0.0 ? worst / largest : INFINITY;
}

// m across the GEMV (<= 32) and panel GEMM paths; k with partial blocks, phases that put block
// ends off the 32-lane chunks; fused block rows; n with row tails; a weight of several panels
// (8 MB each in the GEMM's type) whose last one ends inside a 64-row block, k odd.
const QuantizedCase kCases[] = {
    {WeightType::FP8, 1, 37, 100, 0, 0},
    {WeightType::FP8, 1, 256, 1024, 0, 0},
    {WeightType::FP8, 2, 160, 256, 0, 128},
    {WeightType::FP8, 3, 64, 200, 37, 0},
    {WeightType::FP8, 5, 130, 300, 100, 64},
    {WeightType::FP8, 8, 9, 129, 127, 0},
    {WeightType::FP8, 9, 37, 100, 16, 20},
    {WeightType::FP8, 20, 43, 260, 3, 0},
    {WeightType::FP8, 33, 130, 300, 100, 64},
    {WeightType::FP8, 128, 96, 1024, 0, 0},
    {WeightType::FP8, 40, 4100, 1031, 5, 0},
    {WeightType::INT8, 1, 37, 100, 0, 0},
    {WeightType::INT8, 2, 256, 1024, 0, 0},
    {WeightType::INT8, 7, 13, 33, 0, 0},
    {WeightType::INT8, 33, 130, 47, 0, 0},
    {WeightType::INT8, 64, 1, 17, 0, 0},
    // 4-bit: group 32 with k ending mid-chunk (k % 64 == 32) and mid-group (k = 100), groups of
    // 64 and 128; m over every GEMV tile shape and the panels.
    {WeightType::INT4, 1, 37, 1024, 0, 0, 32},
    {WeightType::INT4, 1, 256, 96, 0, 0, 32},
    {WeightType::INT4, 2, 21, 100, 0, 0, 32},
    {WeightType::INT4, 3, 64, 512, 0, 0, 128},
    {WeightType::INT4, 5, 130, 320, 0, 0, 64},
    {WeightType::INT4, 9, 9, 160, 0, 0, 32},
    {WeightType::INT4, 33, 130, 384, 0, 0, 128},
    {WeightType::INT4, 40, 4100, 1030, 0, 0, 32},
    {WeightType::MXFP4, 1, 40, 2048, 0, 0, 32},
    {WeightType::MXFP4, 4, 19, 224, 0, 0, 32},
    {WeightType::MXFP4, 64, 70, 96, 0, 0, 32},
    // Past the packed GEMV's 128 rows of a bf16 weight: dequantized blocks still go through it.
    {WeightType::INT4, 200, 70, 256, 0, 0, 32},
    // 4-bit shards starting inside a group: a 32-column run meets two scales, even and odd phases
    // (an odd one splits a byte's two columns between groups).
    {WeightType::INT4, 40, 70, 200, 16, 0, 32},
    {WeightType::MXFP4, 33, 65, 96, 7, 0, 32},
    {WeightType::INT4, 48, 130, 330, 45, 0, 64}};

// bf16 activations: the GEMV forms exact products (the decoded code times bf16 x), the GEMM
// multiplies bf16(code × scale), a rounding of 2^-9 relative per weight.
constexpr double kGemvTolerance = 1e-5;
constexpr double kPanelBf16Tolerance = 1e-2;

// Without AVX512_BF16 the bf16-activation fast path falls back to the reference it is compared
// with, so the comparison would prove nothing.
#define SKIP_WITHOUT_AVX512_BF16() \
  if (!cpu_has_avx512_bf16())      \
  GTEST_SKIP() << "this CPU lacks AVX512_BF16: the fast path would be the reference itself"

// The most rows of x that a quantized product with bf16 activations takes on its own GEMV
// (exact products); from the next on it multiplies blocks dequantized to bf16: on AMX tiles from
// 9 rows, else from 33.
int64_t most_gemv_rows() {
  return cpu_has_amx_bf16() ? 8 : 32;
}

TEST(Quantized, MatmulMatchesReference) {
  SKIP_WITHOUT_AVX512_BF16();
  for (WeightType activations : {WeightType::BF16, WeightType::F32}) {
    for (const QuantizedCase& c : kCases) {
      SCOPED_TRACE(testing::Message()
                   << weight_type_name(c.type) << " act " << weight_type_name(activations)
                   << " m=" << c.m << " n=" << c.n << " k=" << c.k << " phase=" << c.col_phase);
      const Weight w = random_quantized(c, activations, 5);
      const std::vector<float> x = random_x(c.m * c.k, 9, activations == WeightType::BF16);
      std::vector<float> actual(static_cast<size_t>(c.m * c.n), NAN), expected(actual.size());
      matmul(x.data(), c.m, w, actual.data());
      ref::matmul(x.data(), c.m, w, expected.data());
      const bool panel_bf16 = activations == WeightType::BF16 && c.m > most_gemv_rows();
      EXPECT_LE(relative_error(actual, expected),
                panel_bf16 ? kPanelBf16Tolerance : kGemvTolerance);
    }
  }
}

// Where quantized blocks are dequantized to bf16 for the GEMM (bf16 activations, m past
// most_gemv_rows()), the product is x times each weight rounded to bf16 once: against the
// reference on those rounded weights only the order of the sums differs, so any value packed
// wrong (a scale, a column pair, a row) shows far beyond the tolerance.
TEST(Quantized, DequantizedBlocksHoldEachWeightRoundedOnce) {
  SKIP_WITHOUT_AVX512_BF16();
  for (const QuantizedCase& c : kCases) {
    if (c.m <= most_gemv_rows()) continue;
    SCOPED_TRACE(testing::Message() << weight_type_name(c.type) << " m=" << c.m << " n=" << c.n
                                    << " k=" << c.k << " phase=" << c.col_phase);
    const Weight w = random_quantized(c, WeightType::BF16, 5);
    Weight rounded(WeightType::F32, c.n, c.k);
    for (int64_t r = 0; r < c.n; ++r)
      for (int64_t col = 0; col < c.k; ++col)
        rounded.f32()[r * c.k + col] = bf16_to_f32(f32_to_bf16(w.at(r, col)));
    const std::vector<float> x = random_x(c.m * c.k, 9, true);
    std::vector<float> actual(static_cast<size_t>(c.m * c.n), NAN), expected(actual.size());
    matmul(x.data(), c.m, w, actual.data());
    ref::matmul(x.data(), c.m, rounded, expected.data());
    EXPECT_LE(relative_error(actual, expected), kGemvTolerance);
  }
}

// On the f32 GEMM path the panels are dequantized to float32: x (bf16 activations, so already
// bf16 values here) times the exact weights, within the GEMV's tolerance where the bf16 panels
// round each weight. Without AVX512_BF16 every m takes those panels (no q8 GEMV).
void check_f32_panels(bool all_m) {
  const ScopedGemmChoice f32({GemmPath::F32Widened, GemmPath::F32Widened});
  for (const QuantizedCase& c : kCases) {
    if (c.m <= 32 && !all_m) continue;
    SCOPED_TRACE(testing::Message() << weight_type_name(c.type) << " m=" << c.m << " n=" << c.n
                                    << " k=" << c.k << " phase=" << c.col_phase);
    const Weight w = random_quantized(c, WeightType::BF16, 5);
    const std::vector<float> x = random_x(c.m * c.k, 9, true);
    std::vector<float> actual(static_cast<size_t>(c.m * c.n), NAN), expected(actual.size());
    matmul(x.data(), c.m, w, actual.data());
    ref::matmul(x.data(), c.m, w, expected.data());
    EXPECT_LE(relative_error(actual, expected), kGemvTolerance);
  }
}

TEST(Quantized, F32PanelsHoldExactWeights) {
  SKIP_WITHOUT_AVX512_BF16();
  check_f32_panels(false);
  const HiddenAvx512Bf16 hidden;
  check_f32_panels(true);
}

// Deterministic kernels: a row's product is the same bits alone and in a batch of any size,
// with bf16 activations (GEMV at every m) and float32 ones (the reference at every m).
TEST(Quantized, DeterministicRowsEqualTheirProductAlone) {
  const DeterministicKernels deterministic;
  for (WeightType activations : {WeightType::BF16, WeightType::F32}) {
    for (WeightType type : {WeightType::FP8, WeightType::INT8, WeightType::INT4}) {
      SCOPED_TRACE(testing::Message()
                   << weight_type_name(type) << " act " << weight_type_name(activations));
      const QuantizedCase c = type == WeightType::INT4 ? QuantizedCase{type, 64, 130, 320, 0, 0, 32}
                                                       : QuantizedCase{type, 64, 130, 300, 100, 64};
      const Weight w = random_quantized(c, activations, 6);
      expect_rows_equal_alone(w, random_x(c.m * c.k, 10, activations == WeightType::BF16));
    }
  }
}

// A CPU with AVX2 but no AVX-512 runs quantized decode steps on its own GEMVs
// (cpu_gemv_q8_avx2.cpp, cpu_gemv_q4_avx2.cpp): against the reference at every GEMV shape (bf16
// activations: exact products), and a row's result the same bits alone and in a batch
// (deterministic kernels).
TEST(Quantized, GemvOnAvx2MatchesReference) {
  if (!cpu_has_avx2()) GTEST_SKIP() << "this CPU lacks AVX2";
  const HiddenAvx512 hidden;
  for (const QuantizedCase& c : kCases) {
    if (c.m > 32) continue;
    SCOPED_TRACE(testing::Message()
                 << weight_type_name(c.type) << " m=" << c.m << " n=" << c.n << " k=" << c.k
                 << " phase=" << c.col_phase << " group=" << c.group);
    const Weight w = random_quantized(c, WeightType::BF16, 7);
    const std::vector<float> x = random_x(c.m * c.k, 11, false);  // rounded by the kernel
    std::vector<float> actual(static_cast<size_t>(c.m * c.n), NAN), expected(actual.size());
    matmul(x.data(), c.m, w, actual.data());
    std::vector<float> rounded(x.size());
    for (size_t i = 0; i < x.size(); ++i) rounded[i] = bf16_to_f32(f32_to_bf16(x[i]));
    ref::matmul(rounded.data(), c.m, w, expected.data());
    EXPECT_LE(relative_error(actual, expected), kGemvTolerance);
  }
  const DeterministicKernels deterministic;
  for (WeightType type : {WeightType::FP8, WeightType::INT8, WeightType::INT4, WeightType::MXFP4}) {
    const QuantizedCase c =
        four_bit(type) ? QuantizedCase{type, 64, 130, 320, 0, 0, type == WeightType::INT4 ? 64 : 32}
                       : QuantizedCase{type, 64, 130, 300, 100, 64};
    expect_rows_equal_alone(random_quantized(c, WeightType::BF16, 8),
                            random_x(c.m * c.k, 12, true));
  }
}

// One batch of FP8, INT8, INT4, MXFP4 and BF16 jobs: each comes out as its own matmul would.
TEST(Quantized, BatchMixesTypes) {
  SKIP_WITHOUT_AVX512_BF16();
  std::vector<Weight> weights;
  for (size_t i : {0, 1, 2, 3, 4, 5, 12, 16, 19, 24}) {
    weights.push_back(random_quantized(kCases[i], WeightType::BF16, 20 + static_cast<uint32_t>(i)));
  }
  Weight b16(WeightType::BF16, 64, 1024);
  for (int64_t i = 0; i < 64 * 1024; ++i) b16.b16()[i] = f32_to_bf16(std::sin(0.37f * i));
  weights.push_back(std::move(b16));
  const int64_t m = 2;
  std::vector<std::vector<float>> xs, ys;
  std::vector<MatmulJob> jobs;
  for (size_t j = 0; j < weights.size(); ++j) {
    xs.push_back(random_x(m * weights[j].cols(), 50 + static_cast<uint32_t>(j), true));
    ys.emplace_back(static_cast<size_t>(m * weights[j].rows()), NAN);
  }
  for (size_t j = 0; j < weights.size(); ++j)
    jobs.push_back({xs[j].data(), m, &weights[j], ys[j].data()});
  matmul_batch(jobs);
  for (size_t j = 0; j < jobs.size(); ++j) {
    SCOPED_TRACE(testing::Message() << "job " << j);
    std::vector<float> expected(ys[j].size());
    ref::matmul(xs[j].data(), m, weights[j], expected.data());
    EXPECT_LE(relative_error(ys[j], expected), kGemvTolerance);
  }
}

}  // namespace
}  // namespace mlaserve::kernels
