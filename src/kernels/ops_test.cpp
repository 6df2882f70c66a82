// Fast path (ops.h) against the scalar reference (reference.h) on random data with fixed seeds,
// over shapes chosen to hit every tail: m across the GEMV/oneDNN cut-over, N and K that are not
// multiples of the tile widths, single kv rows, several query tokens over a cached prefix,
// shuffled kv slots, and KV pools stored as float32, bf16 and fp8_e4m3.
#include <gtest/gtest.h>
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "kernels/cpu_isa.h"
#include "kernels/deterministic_test_util.h"
#include "kernels/dnnl_matmul.h"
#include "kernels/kernel_mode_test_util.h"
#include "kernels/ops.h"
#include "kernels/reference.h"

namespace mlaserve::kernels {
namespace {

std::vector<float> random_values(size_t count, uint32_t seed, float lo = -1.0f, float hi = 1.0f) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> values(count);
  for (float& v : values) v = dist(rng);
  return values;
}

std::vector<float> round_to_bf16(std::vector<float> values) {
  for (float& v : values) v = bf16_to_f32(f32_to_bf16(v));
  return values;
}

Weight random_weight(WeightType type, int64_t rows, int64_t cols, uint32_t seed) {
  Weight w(type, rows, cols);
  const std::vector<float> values = random_values(static_cast<size_t>(rows * cols), seed);
  for (size_t i = 0; i < values.size(); ++i) {
    if (type == WeightType::F32) {
      w.f32()[i] = values[i];
    } else {
      w.b16()[i] = f32_to_bf16(values[i]);
    }
  }
  return w;
}

// Largest |actual - expected| over max(|expected|, floor), where floor = floor_fraction ·
// max|expected|. floor_fraction = 1 gives a norm-wise relative error (dot products, where sum
// order changes the error of small outputs); small floor_fraction gives an element-wise one.
double relative_error(const std::vector<float>& actual, const std::vector<float>& expected,
                      double floor_fraction) {
  double largest = 0.0;
  for (float e : expected) largest = std::max(largest, std::abs(static_cast<double>(e)));
  const double floor = std::max(floor_fraction * largest, 1e-30);
  double worst = 0.0;
  for (size_t i = 0; i < expected.size(); ++i) {
    const double diff = std::abs(static_cast<double>(actual[i]) - expected[i]);
    if (std::isnan(diff)) return INFINITY;
    worst = std::max(worst, diff / std::max(floor, std::abs(static_cast<double>(expected[i]))));
  }
  return worst;
}

// What a fast path needs (cpu_isa.h). Without it the op falls back to the reference, and a test
// that compares the two would pass having tested nothing.
enum class Isa { Avx512, Avx512Bf16 };

// Why the fast path for `isa` does not run here ("" when it does): the features the CPU lacks.
std::string fast_path_absent(Isa isa) {
  if (isa == Isa::Avx512 ? cpu_has_avx512() : cpu_has_avx512_bf16()) return "";
  std::string missing;
  const auto need = [&](bool has, const char* feature) {
    if (!has) missing += std::string(missing.empty() ? "" : ", ") + feature;
  };
  need(__builtin_cpu_supports("avx512f"), "avx512f");
  need(__builtin_cpu_supports("avx512bw"), "avx512bw");
  need(__builtin_cpu_supports("avx512vl"), "avx512vl");
  need(__builtin_cpu_supports("avx512dq"), "avx512dq");
  need(__builtin_cpu_supports("fma"), "fma");
  if (isa == Isa::Avx512Bf16) need(__builtin_cpu_supports("avx512bf16"), "avx512bf16");
  if (missing.empty()) return "the reference kernels are forced: no fast path runs";
  return "the CPU lacks " + missing +
         ": the fast path falls back to the reference it is tested "
         "against";
}

// Skips the test when the fast path for `isa` does not run.
#define SKIP_WITHOUT_FAST_PATH(isa)                                                       \
  do {                                                                                    \
    if (const std::string why = fast_path_absent(isa); !why.empty()) GTEST_SKIP() << why; \
  } while (false)

// The reference output must carry signal, or agreement would prove nothing.
void expect_not_all_zero(const std::vector<float>& values) {
  EXPECT_TRUE(std::any_of(values.begin(), values.end(), [](float v) { return v != 0.0f; }));
}

constexpr double kF32Tolerance = 1e-5;    // sum-order and ~2-ulp exp differences
constexpr double kBf16XTolerance = 1e-2;  // effect of rounding x to bf16 (8-bit mantissa)

// ---- matmul -----------------------------------------------------------------------------

struct MatmulCase {
  int64_t m, n, k;
};

std::vector<float> run_matmul(const std::vector<float>& x, int64_t m, const Weight& w) {
  std::vector<float> y(static_cast<size_t>(m * w.rows()), NAN);
  matmul(x.data(), m, w, y.data());
  return y;
}

std::vector<float> run_ref_matmul(const std::vector<float>& x, int64_t m, const Weight& w) {
  std::vector<float> y(static_cast<size_t>(m * w.rows()));
  ref::matmul(x.data(), m, w, y.data());
  return y;
}

// m spans the GEMV tiles (1..3 x rows per pass, 4..16 in several passes; up to 32 on an unpacked
// bf16 weight), the products on a bf16 weight's packed copy (groups of 6 x rows and a tail of
// 1..5, up to 128 rows) and the oneDNN path (float32 past 16 rows, bf16 past 32 unpacked or 128
// packed) on packed and on row-major weights; n and k cover row tails (n % 8, n % 64) and
// column tails (k % 16, k % 32).
const MatmulCase kMatmulCases[] = {
    {1, 37, 100},    {2, 37, 100},   {3, 130, 47},  {4, 64, 64},   {5, 17, 33},   {7, 37, 100},
    {8, 5, 1},       {9, 37, 100},   {16, 37, 100}, {17, 37, 100}, {32, 130, 47}, {33, 130, 47},
    {128, 96, 1024}, {1, 256, 1024}, {2, 7, 2816},  {1, 2, 31},    {3, 3, 32},    {64, 1, 17},
    {11, 200, 96},   {6, 128, 64},   {160, 70, 96}};

// Every case of kMatmulCases from min_m rows, on a prepared weight and on a raw one: the fast
// product of x as it is matches the reference within float32 rounding (no bf16 rounding of x).
// `no_packed_copy`: prepare() must not have packed the weight.
void expect_exact_products(WeightType type, int64_t min_m, bool no_packed_copy) {
  for (bool prepared : {false, true}) {
    for (const MatmulCase& c : kMatmulCases) {
      if (c.m < min_m) continue;
      SCOPED_TRACE(testing::Message()
                   << "m=" << c.m << " n=" << c.n << " k=" << c.k << " prepared=" << prepared);
      Weight w = random_weight(type, c.n, c.k, 1);
      if (prepared) prepare(w);
      if (no_packed_copy) {
        EXPECT_EQ(w.packed, nullptr);
      }
      const std::vector<float> x = random_values(static_cast<size_t>(c.m * c.k), 2);
      const std::vector<float> expected = run_ref_matmul(x, c.m, w);
      expect_not_all_zero(expected);
      EXPECT_LE(relative_error(run_matmul(x, c.m, w), expected, 1.0), kF32Tolerance);
    }
  }
}

// Runs on any CPU: without AVX-512 every F32 matmul goes to oneDNN instead of the GEMV.
TEST(Matmul, F32MatchesReference) {
  expect_exact_products(WeightType::F32, 0, false);
}

// The fast BF16 path rounds x to bf16: it must match the reference fed that rounded x, and
// differ from the exact product only by that rounding.
TEST(Matmul, Bf16MatchesReferenceOnRoundedX) {
  SKIP_WITHOUT_FAST_PATH(Isa::Avx512Bf16);
  for (bool packed : {false, true}) {
    for (const MatmulCase& c : kMatmulCases) {
      SCOPED_TRACE(testing::Message()
                   << "m=" << c.m << " n=" << c.n << " k=" << c.k << " packed=" << packed);
      Weight w = random_weight(WeightType::BF16, c.n, c.k, 3);
      if (packed) {
        prepare(w);
        // The packed copy is in the layout the few-rows products read, so they run on it.
        EXPECT_NE(dnnl_packed_bf16(w), nullptr);
      }
      const std::vector<float> x = random_values(static_cast<size_t>(c.m * c.k), 4);
      const std::vector<float> actual = run_matmul(x, c.m, w);
      const std::vector<float> expected = run_ref_matmul(round_to_bf16(x), c.m, w);
      expect_not_all_zero(expected);
      EXPECT_LE(relative_error(actual, expected, 1.0), kF32Tolerance);
      EXPECT_LE(relative_error(actual, run_ref_matmul(x, c.m, w), 1.0), kBf16XTolerance);
    }
  }
}

// Where the packed copy serves every product (the bf16 path for both classes), the loader drops
// a bf16 weight's row-major values: every m, through the packed kernel and oneDNN, must still
// give the product of the values it had.
TEST(Matmul, AWeightWithoutItsRowMajorValuesServesEveryRowCount) {
  SKIP_WITHOUT_FAST_PATH(Isa::Avx512Bf16);
  for (const MatmulCase& c : kMatmulCases) {
    SCOPED_TRACE(testing::Message() << "m=" << c.m << " n=" << c.n << " k=" << c.k);
    Weight w = random_weight(WeightType::BF16, c.n, c.k, 3);
    prepare(w);
    const std::vector<float> x = random_values(static_cast<size_t>(c.m * c.k), 4);
    const std::vector<float> expected = run_ref_matmul(round_to_bf16(x), c.m, w);
    ASSERT_TRUE(packed_copy_serves_all(WeightType::BF16, c.n, c.k));
    ASSERT_TRUE(drop_row_major_if_unneeded(w));
    EXPECT_EQ(w.bytes(), 0u);
    EXPECT_LE(relative_error(run_matmul(x, c.m, w), expected, 1.0), kF32Tolerance);
  }
  // Not where a mode reads the row-major values: the f32 GEMM path for a class.
  const ScopedGemmChoice mixed({GemmPath::F32Widened, GemmPath::Bf16Dot});
  Weight w = random_weight(WeightType::BF16, 96, 1024, 5);
  prepare(w);
  EXPECT_FALSE(drop_row_major_if_unneeded(w));
  EXPECT_GT(w.bytes(), 0u);
}

// The f32 GEMM path widens bf16 weights and keeps x as it is: beyond the GEMV's rows the
// product matches the exact one (no bf16 rounding of x), packed weight or not, and prepare()
// makes no packed copy when neither class uses bf16. A mixed choice routes by m: the mid class
// (m < kLargeGemmRows) exact, the large one rounded.
TEST(Matmul, F32WidenedPathKeepsXExact) {
  SKIP_WITHOUT_FAST_PATH(Isa::Avx512Bf16);  // the GEMV it shares rows with rounds x in bf16
  {
    const ScopedGemmChoice f32({GemmPath::F32Widened, GemmPath::F32Widened});
    // Past the GEMV's 32 rows on an unpacked bf16 weight.
    expect_exact_products(WeightType::BF16, 33, true);
  }
  const ScopedGemmChoice mixed({GemmPath::F32Widened, GemmPath::Bf16Dot});
  Weight w = random_weight(WeightType::BF16, 96, 1024, 5);
  prepare(w);
  EXPECT_NE(w.packed, nullptr);  // the large class multiplies in bf16
  for (int64_t m : {kLargeGemmRows - 1, kLargeGemmRows}) {
    SCOPED_TRACE(testing::Message() << "m=" << m);
    const std::vector<float> x = random_values(static_cast<size_t>(m * 1024), 6);
    const std::vector<float> exact = run_ref_matmul(x, m, w);
    const double error = relative_error(run_matmul(x, m, w), exact, 1.0);
    if (m < kLargeGemmRows) {
      EXPECT_LE(error, kF32Tolerance);
    } else {
      EXPECT_GT(error, 10 * kF32Tolerance);
      EXPECT_LE(relative_error(run_matmul(x, m, w), run_ref_matmul(round_to_bf16(x), m, w), 1.0),
                kF32Tolerance);
    }
  }
}

// The comparison itself must be sharp enough to see a kernel that mishandles one element:
// here the last column of one row (the k-tail lane) changes from its true value.
TEST(Matmul, ComparisonCatchesOneWrongWeight) {
  for (WeightType type : {WeightType::F32, WeightType::BF16}) {
    for (int64_t m : {1, 64}) {
      const int64_t n = 37, k = 100;
      const Weight w = random_weight(type, n, k, 5);
      Weight wrong = random_weight(type, n, k, 5);
      if (type == WeightType::F32) {
        wrong.f32()[n * k - 1] += 0.25f;
      } else {
        wrong.b16()[n * k - 1] = f32_to_bf16(wrong.at(n - 1, k - 1) + 0.25f);
      }
      const std::vector<float> x = round_to_bf16(random_values(static_cast<size_t>(m * k), 6));
      EXPECT_GT(relative_error(run_matmul(x, m, wrong), run_ref_matmul(x, m, w), 1.0),
                10 * kF32Tolerance);
    }
  }
}

// A batch mixes weight types, GEMV and oneDNN row counts, packed and row-major weights and
// sizes from a few rows to megabytes (split between threads inside a job): every job must
// come out as its own matmul would.
TEST(Matmul, BatchMatchesReference) {
  // Its point is GEMV and oneDNN jobs of both types in one batch: BF16 needs both to run.
  SKIP_WITHOUT_FAST_PATH(Isa::Avx512Bf16);
  struct JobCase {
    WeightType type;
    int64_t m, n, k;
    bool packed;
  };
  const JobCase cases[] = {
      {WeightType::BF16, 1, 1024, 1024, true}, {WeightType::BF16, 1, 37, 100, false},
      {WeightType::F32, 1, 32, 1024, true},    {WeightType::BF16, 2, 512, 1024, true},
      {WeightType::BF16, 9, 64, 64, true},     {WeightType::F32, 3, 130, 47, false},
      {WeightType::BF16, 1, 7, 2816, true},    {WeightType::F32, 1, 2048, 512, false},
      {WeightType::BF16, 1, 256, 64, false}};
  std::vector<Weight> weights;
  std::vector<std::vector<float>> xs, ys;
  std::vector<MatmulJob> jobs;
  for (const JobCase& c : cases) {
    weights.push_back(random_weight(c.type, c.n, c.k, static_cast<uint32_t>(weights.size() + 30)));
    if (c.packed) prepare(weights.back());
    const std::vector<float> x = random_values(static_cast<size_t>(c.m * c.k), 7);
    xs.push_back(c.type == WeightType::BF16 ? round_to_bf16(x) : x);
    ys.emplace_back(static_cast<size_t>(c.m * c.n), NAN);
  }
  for (size_t j = 0; j < weights.size(); ++j) {
    jobs.push_back({xs[j].data(), cases[j].m, &weights[j], ys[j].data()});
  }
  matmul_batch(jobs);
  for (size_t j = 0; j < jobs.size(); ++j) {
    SCOPED_TRACE(testing::Message() << "job " << j);
    const std::vector<float> expected = run_ref_matmul(xs[j], cases[j].m, weights[j]);
    expect_not_all_zero(expected);
    EXPECT_LE(relative_error(ys[j], expected, 1.0), kF32Tolerance);
  }
}

// Deterministic kernels: a row's product is the same bits alone and in a batch of any size,
// packed weights or not (n, k with row and column tails).
TEST(Matmul, DeterministicRowsEqualTheirProductAlone) {
  const DeterministicKernels deterministic;
  for (WeightType type : {WeightType::F32, WeightType::BF16}) {
    SCOPED_TRACE(weight_type_name(type));
    Weight w = random_weight(type, 130, 1000, 8);
    prepare(w);
    expect_rows_equal_alone(w, random_values(64 * 1000, 9));
  }
  const HiddenAvx512Bf16 hidden;  // bf16 weights on the widening GEMV
  Weight w = random_weight(WeightType::BF16, 130, 1000, 8);
  prepare(w);
  expect_rows_equal_alone(w, random_values(64 * 1000, 9));
}

// Without AVX-512 (AMD Zen 2/3, Intel Haswell to Comet Lake) the AVX2 GEMV takes float32 and
// bf16 weights up to 16 rows (bf16 widened: x stays exact), oneDNN f32 the rest.
TEST(Matmul, WithoutAvx512TheAvx2GemvKeepsXExact) {
  if (!cpu_has_avx2()) GTEST_SKIP() << "the CPU lacks AVX2 or FMA";
  const HiddenAvx512 hidden;
  expect_exact_products(WeightType::F32, 0, false);
  expect_exact_products(WeightType::BF16, 0, true);
  const DeterministicKernels deterministic;  // the GEMV at every m: rows alone equal rows batched
  for (WeightType type : {WeightType::F32, WeightType::BF16}) {
    Weight w = random_weight(type, 130, 1000, 8);
    prepare(w);
    expect_rows_equal_alone(w, random_values(64 * 1000, 9));
  }
}

// Without AVX512_BF16 (Skylake-SP to Ice Lake Xeons) bf16 weights are widened to float32 in
// the GEMV and the GEMM alike, and x is never rounded: every m matches the exact product, and
// no packed bf16 copy is made.
TEST(Matmul, WithoutAvx512Bf16BothPathsKeepXExact) {
  SKIP_WITHOUT_FAST_PATH(Isa::Avx512);
  const HiddenAvx512Bf16 hidden;
  expect_exact_products(WeightType::BF16, 0, true);
}

TEST(Matmul, ZeroColumnsGiveZeros) {
  const Weight w(WeightType::F32, 3, 0);
  const std::vector<float> y = run_matmul({}, 2, w);
  EXPECT_EQ(y, std::vector<float>(6, 0.0f));
}

// ---- row-wise ops -----------------------------------------------------------------------

TEST(RmsNorm, MatchesReference) {
  SKIP_WITHOUT_FAST_PATH(Isa::Avx512);
  for (int64_t rows : {1, 3, 64}) {
    for (int64_t dim : {1, 7, 100, 1024, 7168}) {
      SCOPED_TRACE(testing::Message() << "rows=" << rows << " dim=" << dim);
      const std::vector<float> x = random_values(static_cast<size_t>(rows * dim), 7, -3.0f, 3.0f);
      const std::vector<float> gamma = random_values(static_cast<size_t>(dim), 8);
      std::vector<float> expected(x.size()), actual(x.size(), NAN);
      const float eps = dim == 7 ? 0.5f : 1e-6f;  // a large eps once, so that it shows
      ref::rms_norm(x.data(), gamma.data(), rows, dim, eps, expected.data());
      rms_norm(x.data(), gamma.data(), rows, dim, eps, actual.data());
      EXPECT_LE(relative_error(actual, expected, 1e-3), kF32Tolerance);
      std::vector<float> in_place = x;  // y may alias x
      rms_norm(in_place.data(), gamma.data(), rows, dim, eps, in_place.data());
      EXPECT_LE(relative_error(in_place, expected, 1e-3), kF32Tolerance);
    }
  }
}

TEST(SiluMul, MatchesReference) {
  SKIP_WITHOUT_FAST_PATH(Isa::Avx512);
  for (float range : {4.0f, 100.0f}) {  // 100: exp overflows to inf and underflows to 0
    for (int64_t rows : {1, 5, 33}) {
      for (int64_t inter : {1, 17, 512, 2816}) {
        SCOPED_TRACE(testing::Message()
                     << "rows=" << rows << " inter=" << inter << " range=" << range);
        const std::vector<float> gate_up =
            random_values(static_cast<size_t>(rows * 2 * inter), 9, -range, range);
        std::vector<float> expected(static_cast<size_t>(rows * inter)),
            actual(expected.size(), NAN);
        ref::silu_mul(gate_up.data(), rows, inter, expected.data());
        silu_mul(gate_up.data(), rows, inter, actual.data());
        EXPECT_LE(relative_error(actual, expected, 1e-3), kF32Tolerance);
      }
    }
  }
}

TEST(Softmax, MatchesReference) {
  SKIP_WITHOUT_FAST_PATH(Isa::Avx512);
  for (float range : {1.0f, 30.0f}) {
    for (int64_t n : {1, 15, 16, 17, 100, 32000}) {
      SCOPED_TRACE(testing::Message() << "n=" << n << " range=" << range);
      std::vector<float> expected = random_values(static_cast<size_t>(n), 10, -range, range);
      if (n > 2) expected[1] = -INFINITY;  // a masked entry
      std::vector<float> actual = expected;
      ref::softmax(expected.data(), n);
      softmax(actual.data(), n);
      EXPECT_LE(relative_error(actual, expected, 1e-3), kF32Tolerance);
      if (n > 2) {
        EXPECT_EQ(actual[1], 0.0f);
      }
    }
  }
}

TEST(Softmax, LargeLogitsDoNotOverflow) {
  SKIP_WITHOUT_FAST_PATH(Isa::Avx512);
  std::vector<float> x = {1000.0f, 999.0f, -1000.0f};
  std::vector<float> expected = x;
  ref::softmax(expected.data(), 3);
  softmax(x.data(), 3);
  EXPECT_LE(relative_error(x, expected, 1e-3), kF32Tolerance);
}

// Against std::nth_element: every k of short rows, several of long ones, rows of few distinct
// values (the k-th inside a run of equal ones), -inf and NaN (counted as -inf).
TEST(KthLargest, MatchesReference) {
  SKIP_WITHOUT_FAST_PATH(Isa::Avx512);
  for (int64_t n : {1, 16, 33, 100, 129280}) {
    std::vector<float> random = random_values(static_cast<size_t>(n), 14, -5.0f, 5.0f);
    std::vector<float> few(random.size());
    for (size_t i = 0; i < few.size(); ++i) few[i] = static_cast<float>(i * 7 % 5);
    std::vector<float> special = random;
    for (size_t i = 0; i < special.size(); i += 3) special[i] = i % 2 ? -INFINITY : NAN;
    for (const std::vector<float>& x : {random, few, special}) {
      const std::vector<int64_t> ks =
          n <= 100 ? [&] {
            std::vector<int64_t> all(static_cast<size_t>(n));
            std::iota(all.begin(), all.end(), 1);
            return all;
          }()
                   : std::vector<int64_t>{1, 2, 50, 2048, n / 2, n - 1, n};
      for (int64_t k : ks) {
        const KthLargest expected = ref::kth_largest(x.data(), n, k);
        const KthLargest actual = kth_largest(x.data(), n, k);
        EXPECT_EQ(actual.value, expected.value) << "n=" << n << " k=" << k;
        EXPECT_EQ(actual.greater, expected.greater) << "n=" << n << " k=" << k;
      }
    }
  }
}

// Against sorting: random weights and weights of few distinct values (the nucleus ending inside
// a run of equal ones), targets from one weight's mass to past the total (rounding: all taken).
TEST(NucleusBar, MatchesReference) {
  SKIP_WITHOUT_FAST_PATH(Isa::Avx512);
  for (int64_t n : {1, 20, 33, 1000, 129280}) {
    std::vector<float> random = random_values(static_cast<size_t>(n), 15, 0.001f, 1.0f);
    std::vector<float> few(random.size());
    for (size_t i = 0; i < few.size(); ++i) few[i] = 0.25f * static_cast<float>(1 + i * 7 % 4);
    for (const std::vector<float>& w : {random, few}) {
      double total = 0.0;
      for (float v : w) total += v;
      for (double fraction : {1e-6, 0.1, 0.5, 0.9, 0.95, 0.999, 2.0}) {
        SCOPED_TRACE(testing::Message() << "n=" << n << " fraction=" << fraction);
        const NucleusBar expected = ref::nucleus_bar(w.data(), n, fraction * total);
        const NucleusBar actual = nucleus_bar(w.data(), n, fraction * total);
        EXPECT_EQ(actual.weight, expected.weight);
        EXPECT_EQ(actual.equal_taken, expected.equal_taken);
      }
    }
  }
}

// The first of equal maxima, -inf rows, and the first NaN wherever it sits (before or after the
// largest value, in a full vector or the tail).
TEST(FirstArgmax, MatchesReference) {
  SKIP_WITHOUT_FAST_PATH(Isa::Avx512);
  for (int64_t n : {1, 15, 16, 17, 129280}) {
    std::vector<float> x = random_values(static_cast<size_t>(n), 13, -5.0f, 5.0f);
    std::vector<std::vector<float>> rows = {x,
                                            std::vector<float>(static_cast<size_t>(n), -INFINITY)};
    for (int64_t at : {n / 3, n - 1}) {  // ties of the largest value
      std::vector<float> tied = x;
      tied[static_cast<size_t>(at)] = 9.0f;
      tied[static_cast<size_t>(n - 1)] = 9.0f;
      rows.push_back(tied);
      tied[static_cast<size_t>(n / 2)] = NAN;
      tied[static_cast<size_t>(n - 1)] = NAN;
      rows.push_back(tied);
    }
    for (const std::vector<float>& row : rows) {
      SCOPED_TRACE(testing::Message() << "n=" << n);
      EXPECT_EQ(first_argmax(row.data(), n), ref::first_argmax(row.data(), n));
    }
  }
}

// Within a few ulp of std::exp's weights (below float's normal range, where a few ulp are
// absolute, within 1e-37), -inf logits weighing 0 and the largest exactly 1.
TEST(TemperatureWeights, MatchesReference) {
  SKIP_WITHOUT_FAST_PATH(Isa::Avx512);
  for (float temperature : {0.05f, 0.6f, 1.0f, 2.5f}) {
    for (int64_t n : {1, 17, 32000}) {
      SCOPED_TRACE(testing::Message() << "n=" << n << " temperature=" << temperature);
      std::vector<float> logits = random_values(static_cast<size_t>(n), 12, -30.0f, 30.0f);
      if (n > 2) logits[1] = -INFINITY;
      const int64_t top = std::max_element(logits.begin(), logits.end()) - logits.begin();
      std::vector<float> expected(static_cast<size_t>(n)), actual(expected.size(), NAN);
      ref::temperature_weights(logits.data(), n, logits[top], temperature, expected.data());
      temperature_weights(logits.data(), n, logits[top], temperature, actual.data());
      for (int64_t i = 0; i < n; ++i) {
        const float e = expected[static_cast<size_t>(i)], a = actual[static_cast<size_t>(i)];
        ASSERT_NEAR(a, e, 5e-7f * e + 1e-37f) << "logit " << logits[static_cast<size_t>(i)];
      }
      EXPECT_EQ(actual[static_cast<size_t>(top)], 1.0f);
      if (n > 2) {
        EXPECT_EQ(actual[1], 0.0f);
      }
    }
  }
}

// Vectors `stride` floats apart; the gap after each vector's dim floats must stay untouched.
TEST(Rope, MatchesReferenceAndKeepsGaps) {
  SKIP_WITHOUT_FAST_PATH(Isa::Avx512);
  for (int64_t dim : {2, 6, 7, 16, 32, 64}) {
    for (int64_t n_vectors : {1, 16, 100}) {
      SCOPED_TRACE(testing::Message() << "dim=" << dim << " n_vectors=" << n_vectors);
      const int64_t stride = dim + 5;
      std::vector<float> expected = random_values(static_cast<size_t>(n_vectors * stride), 11);
      std::vector<float> actual = expected;
      const std::vector<float> angles =
          random_values(static_cast<size_t>(dim / 2), 12, -3.0f, 3.0f);
      std::vector<float> cos_theta, sin_theta;
      for (float a : angles) {
        cos_theta.push_back(std::cos(a));
        sin_theta.push_back(std::sin(a));
      }
      ref::rope_interleaved(expected.data(), n_vectors, stride, dim, cos_theta.data(),
                            sin_theta.data());
      rope_interleaved(actual.data(), n_vectors, stride, dim, cos_theta.data(), sin_theta.data());
      EXPECT_LE(relative_error(actual, expected, 1e-2), kF32Tolerance);
    }
  }
}

// Routing has one implementation (a token's few dozen logits), so it is checked against
// hand-computed answers. Experts come back best first.
struct RouteAnswer {
  std::vector<int32_t> ids;
  std::vector<float> weights;
};

RouteAnswer route_of(const std::vector<float>& logits, const RouterSpec& spec) {
  RouteAnswer a{std::vector<int32_t>(static_cast<size_t>(spec.top_k)),
                std::vector<float>(static_cast<size_t>(spec.top_k))};
  route(logits.data(), spec, a.ids.data(), a.weights.data());
  return a;
}

void expect_route(const RouteAnswer& got, const RouteAnswer& want) {
  EXPECT_EQ(got.ids, want.ids);
  ASSERT_EQ(got.weights.size(), want.weights.size());
  for (size_t i = 0; i < want.weights.size(); ++i)
    EXPECT_NEAR(got.weights[i], want.weights[i], 1e-6);
}

// Softmax of log(s) is s / Σs, so these logits give softmax scores 0.1, 0.2, 0.3, 0.4.
const std::vector<float> kTenthsLogits = {std::log(1.0f), std::log(2.0f), std::log(3.0f),
                                          std::log(4.0f)};

TEST(Route, SoftmaxGreedyScalesWithoutNormalising) {
  const RouterSpec spec{RouterScoring::Softmax, RouterTopk::Greedy, 4, 2, 1, 1, false, 2.0f};
  expect_route(route_of(kTenthsLogits, spec), {{3, 2}, {0.8f, 0.6f}});
}

TEST(Route, SoftmaxGreedyNormalisesInsteadOfScaling) {  // V2: one or the other
  const RouterSpec spec{RouterScoring::Softmax, RouterTopk::Greedy, 4, 2, 1, 1, true, 2.0f};
  expect_route(route_of(kTenthsLogits, spec), {{3, 2}, {0.4f / 0.7f, 0.3f / 0.7f}});
}

TEST(Route, GroupLimitedGreedyPicksFromTheGroupsWithTheBestExpert) {
  // Scores s / 33.5 in 4 groups of 2: {1.5, 9} {5, 5} {8, 1} {2, 2}. Group maxima 9, 5, 8, 2, so
  // groups 0 and 2 remain, and the third expert is 0 (1.5), not 2 or 3 (5) of group 1.
  const std::vector<float> s = {1.5f, 9, 5, 5, 8, 1, 2, 2};
  std::vector<float> logits;
  for (float v : s) logits.push_back(std::log(v));
  const RouterSpec spec{
      RouterScoring::Softmax, RouterTopk::GroupLimitedGreedy, 8, 3, 4, 2, false, 1.0f};
  expect_route(route_of(logits, spec), {{1, 4, 0}, {9 / 33.5f, 8 / 33.5f, 1.5f / 33.5f}});
}

TEST(Route, NoauxTcRanksGroupsByTheirTopTwoBiasedScoresAndWeighsUnbiased) {
  // Sigmoid scores: 0.75 for expert 4 (logit log 3), 0.5 for the rest. Biased choice scores in
  // 4 groups of 2: {0.95, 0.5} {0.75, 0.76} {1.05, 0.75} {0.5, 0.5}. Top-2 sums 1.45, 1.51,
  // 1.8, 1.0 keep groups 2 and 1 (ranking groups by their best expert would keep group 0).
  std::vector<float> logits(8, 0.0f);
  logits[4] = std::log(3.0f);
  const std::vector<float> bias = {0.45f, 0, 0.25f, 0.26f, 0.3f, 0.25f, 0, 0};
  const RouterSpec spec{
      RouterScoring::Sigmoid, RouterTopk::NoauxTc, 8, 2, 4, 2, true, 2.5f, bias.data()};
  // Unbiased scores 0.75 and 0.5, normalised (0.6, 0.4), then scaled by 2.5.
  expect_route(route_of(logits, spec), {{4, 3}, {1.5f, 1.0f}});
}

TEST(Route, SqrtSoftplusWeighsByTheRootOfTheSoftplus) {
  // softplus(log(e^s - 1)) = s: logits chosen so the scores are sqrt(1), sqrt(3), sqrt(2), ~0.
  const std::vector<float> logits = {std::log(std::exp(1.0f) - 1), std::log(std::exp(3.0f) - 1),
                                     std::log(std::exp(2.0f) - 1), -30.0f};
  const std::vector<float> bias(4, 0.0f);
  const RouterSpec spec{
      RouterScoring::SqrtSoftplus, RouterTopk::NoauxTc, 4, 2, 1, 1, true, 1.5f, bias.data()};
  const float one = 1.0f, three = std::sqrt(3.0f), two = std::sqrt(2.0f);
  expect_route(route_of(logits, spec),
               {{1, 2}, {1.5f * three / (three + two), 1.5f * two / (three + two)}});
  // Hash routing: experts given (a token's tid2eid row), weighed the same way.
  std::vector<float> weights(2);
  const std::vector<int32_t> given = {0, 2};
  route_given(logits.data(), spec, given.data(), weights.data());
  EXPECT_NEAR(weights[0], 1.5f * one / (one + two), 1e-6);
  EXPECT_NEAR(weights[1], 1.5f * two / (one + two), 1e-6);
}

// ---- attention --------------------------------------------------------------------------

struct AbsorbedCase {
  int64_t n_q, n_heads, d_latent, d_rope, n_kv;
};

// kv_slots: n_kv distinct rows of a pool twice as large, in shuffled order, so a kernel that
// read row j instead of row kv_slots[j] would see different (random, non-zero) data.
std::vector<int32_t> shuffled_slots(int64_t n_kv, int64_t pool_rows, uint32_t seed) {
  std::vector<int32_t> slots(static_cast<size_t>(pool_rows));
  std::iota(slots.begin(), slots.end(), 0);
  std::shuffle(slots.begin(), slots.end(), std::mt19937(seed));
  slots.resize(static_cast<size_t>(n_kv));
  return slots;
}

// A KV pool layer of float32 rows [n_rows, d_qk] stored as dtype (core/kv_dtype.h's codec).
struct StoredKv {
  KvDtype dtype;
  int64_t d_qk;
  std::vector<uint8_t> values;
  std::vector<float> scales;

  StoredKv(const std::vector<float>& rows, int64_t d, KvDtype type)
      : dtype(type),
        d_qk(d),
        values(rows.size() * static_cast<size_t>(kv_value_bytes(type))),
        scales(rows.size() / static_cast<size_t>(d)) {
    for (size_t r = 0; r < scales.size(); ++r) {
      encode_kv_row(dtype, rows.data() + r * static_cast<size_t>(d_qk), d_qk,
                    values.data() + r * static_cast<size_t>(d_qk * kv_value_bytes(dtype)),
                    &scales[r]);
    }
  }
  KvRows rows() const { return {dtype, d_qk, values.data(), scales.data()}; }
};

const KvDtype kKvDtypes[] = {KvDtype::Float32, KvDtype::BFloat16, KvDtype::Fp8E4m3};

struct AbsorbedRun {
  std::vector<float> q, pool;  // q [n_q, n_heads, d_qk]; float32 pool rows [pool_rows, d_qk]
  AbsorbedAttention shape;
};

// Scale 4/sqrt(d) makes the softmax peaky, so the running max changes between kv blocks.
AbsorbedRun random_absorbed(const AbsorbedCase& c, int64_t pool_rows) {
  const int64_t d_qk = c.d_latent + c.d_rope;
  return {
      random_values(static_cast<size_t>(c.n_q * c.n_heads * d_qk), 15),
      random_values(static_cast<size_t>(pool_rows * d_qk), 16),
      {c.n_q, c.n_heads, c.d_latent, c.d_rope, c.n_kv, 4.0f / std::sqrt(static_cast<float>(d_qk))}};
}

// The fast path against the reference on the same pool stored as dtype: both read the same
// rounded values (the fast decode must give the reference's floats), so the float32 bound holds.
// With bf16 activations over a bf16 pool both round q (absorbed_scores_in_bf16), the fast path
// multiplying by vdpbf16ps: the products are the same exact ones.
void check_absorbed(const AbsorbedCase& c, const std::vector<int32_t>& slots, int64_t pool_rows,
                    KvDtype dtype = KvDtype::Float32, bool bf16_activations = false) {
  SCOPED_TRACE(testing::Message() << "n_q=" << c.n_q << " n_heads=" << c.n_heads
                                  << " d_latent=" << c.d_latent << " d_rope=" << c.d_rope
                                  << " n_kv=" << c.n_kv << " kv " << kv_dtype_name(dtype)
                                  << (bf16_activations ? " bf16 activations" : ""));
  AbsorbedRun run = random_absorbed(c, pool_rows);
  run.shape.bf16_activations = bf16_activations;
  const StoredKv kv(run.pool, c.d_latent + c.d_rope, dtype);
  std::vector<float> expected(static_cast<size_t>(c.n_q * c.n_heads * c.d_latent));
  std::vector<float> actual(expected.size(), NAN);
  ref::mla_attention_absorbed(run.shape, run.q.data(), kv.rows(), slots.data(), expected.data());
  mla_attention_absorbed(run.shape, run.q.data(), kv.rows(), slots.data(), actual.data());
  expect_not_all_zero(expected);
  EXPECT_LE(relative_error(actual, expected, 1.0), kF32Tolerance);
}

// DeepSeek-V4's attention with sinks: head counts that do and do not fill the 4-row tiles, row
// counts around the 32-row block (none: the sink takes everything), rows in any order.
TEST(SinkAttention, MatchesReference) {
  SKIP_WITHOUT_FAST_PATH(Isa::Avx512);
  struct Case {
    int64_t heads, dim, rows;
  };
  for (const Case& c : {Case{16, 512, 300}, Case{3, 64, 1}, Case{4, 64, 0}, Case{5, 80, 33},
                        Case{1, 16, 32}, Case{16, 512, 64}}) {
    const std::vector<float> q = random_values(static_cast<size_t>(c.heads * c.dim), 3);
    const std::vector<float> storage = random_values(static_cast<size_t>(2 * c.rows * c.dim), 4);
    const std::vector<float> sink = random_values(static_cast<size_t>(c.heads), 5, -2.0f, 2.0f);
    std::vector<const float*> rows;
    for (int64_t j = 0; j < c.rows; ++j)
      rows.push_back(storage.data() + ((j * 7) % (2 * c.rows)) * c.dim);
    const SinkAttention shape{c.heads, c.dim, c.rows, 0.3f};
    std::vector<float> expected(q.size(), NAN), actual(q.size(), NAN);
    ref::sink_attention(shape, q.data(), rows.data(), sink.data(), expected.data());
    sink_attention(shape, q.data(), rows.data(), sink.data(), actual.data());
    if (c.rows == 0) {
      EXPECT_EQ(actual, std::vector<float>(q.size(), 0.0f));
      continue;
    }
    expect_not_all_zero(expected);
    EXPECT_LE(relative_error(actual, expected, 1.0), kF32Tolerance)
        << c.heads << " heads of " << c.dim << ", " << c.rows << " rows";
  }
}

// Odd head counts, latent and rope widths (row tails of the decode and the score tiles), single
// kv rows, kv counts around the 32-row block and several query tokens over a cached prefix.
const AbsorbedCase kAbsorbedCases[] = {
    {1, 1, 16, 8, 1},    {1, 8, 64, 16, 37},  {3, 8, 64, 16, 100}, {1, 16, 256, 32, 1000},
    {5, 3, 20, 7, 70},   {33, 8, 64, 16, 40}, {2, 5, 100, 3, 2},   {4, 16, 256, 32, 300},
    {1, 2, 512, 64, 33}, {2, 3, 17, 5, 65},   {1, 7, 500, 13, 31}};

TEST(AbsorbedAttention, MatchesReferenceWithShuffledSlots) {
  SKIP_WITHOUT_FAST_PATH(Isa::Avx512);
  for (KvDtype dtype : kKvDtypes) {
    for (const AbsorbedCase& c : kAbsorbedCases) {
      const int64_t pool_rows = 2 * c.n_kv + 5;
      check_absorbed(c, shuffled_slots(c.n_kv, pool_rows, 17), pool_rows, dtype);
    }
  }
  for (const AbsorbedCase& c : kAbsorbedCases) {
    const int64_t pool_rows = 2 * c.n_kv + 5;
    check_absorbed(c, shuffled_slots(c.n_kv, pool_rows, 18), pool_rows, KvDtype::BFloat16, true);
  }
}

// bf16 activations over a bf16 pool take the bf16 scores where this CPU's GEMM path is the bf16
// dot product: q's rounding is then there to see against float32 activations.
TEST(AbsorbedAttention, Bf16ActivationsRoundQWhereTheBf16DotIsTheGemmPath) {
  const AbsorbedCase c{2, 16, 256, 32, 300};
  AbsorbedRun run = random_absorbed(c, c.n_kv);
  const StoredKv kv(run.pool, c.d_latent + c.d_rope, KvDtype::BFloat16);
  const std::vector<int32_t> slots = shuffled_slots(c.n_kv, c.n_kv, 19);
  std::vector<float> plain(static_cast<size_t>(c.n_q * c.n_heads * c.d_latent)), rounded(plain);
  mla_attention_absorbed(run.shape, run.q.data(), kv.rows(), slots.data(), plain.data());
  run.shape.bf16_activations = true;
  mla_attention_absorbed(run.shape, run.q.data(), kv.rows(), slots.data(), rounded.data());
  if (absorbed_scores_in_bf16(run.shape, kv.rows())) {
    EXPECT_GT(relative_error(rounded, plain, 1.0), 0.0);
  } else {
    EXPECT_EQ(rounded, plain);  // float32 scores either way
  }
  const ScopedGemmChoice f32({GemmPath::F32Widened, GemmPath::F32Widened});
  EXPECT_FALSE(absorbed_scores_in_bf16(run.shape, kv.rows()));
}

// What storing the cache in a smaller type costs: the fast path over a bf16 or fp8 pool against
// the reference over the float32 pool it came from. A stored value is off by at most u of
// itself, u = 2^-9 (bf16) or 2^-4 (fp8; below the row's subnormal range, 2^-10 of its scale).
// An output element is a softmax-weighted mean of c_kv values, so their rounding moves it by at
// most u of the largest |c_kv|, and the scores' rounding shifts the weights by about as much
// again (these cases measure up to 2.0u for bf16, 0.92u for fp8). Bound: 3u, norm-wise. With
// bf16 activations q is rounded too (scores by vdpbf16ps): up to 3.3u measured, bound 5u.
TEST(AbsorbedAttention, Bf16AndFp8KvStayNearFloat32Kv) {
  struct Bound {
    KvDtype dtype;
    bool bf16_activations;
    double bound;
  };
  const Bound bounds[] = {{KvDtype::BFloat16, false, 3 * std::ldexp(1.0, -9)},
                          {KvDtype::BFloat16, true, 5 * std::ldexp(1.0, -9)},
                          {KvDtype::Fp8E4m3, false, 3 * std::ldexp(1.0, -4)}};
  for (const auto& [dtype, bf16_activations, bound] : bounds) {
    for (const AbsorbedCase& c : kAbsorbedCases) {
      SCOPED_TRACE(testing::Message()
                   << "n_q=" << c.n_q << " n_heads=" << c.n_heads
                   << " d_qk=" << c.d_latent + c.d_rope << " n_kv=" << c.n_kv << " kv "
                   << kv_dtype_name(dtype) << (bf16_activations ? " bf16 activations" : ""));
      const int64_t pool_rows = c.n_kv + 3;
      const std::vector<int32_t> slots = shuffled_slots(c.n_kv, pool_rows, 26);
      AbsorbedRun run = random_absorbed(c, pool_rows);
      run.shape.bf16_activations = bf16_activations;
      const int64_t d_qk = c.d_latent + c.d_rope;
      std::vector<float> exact(static_cast<size_t>(c.n_q * c.n_heads * c.d_latent));
      std::vector<float> stored(exact.size(), NAN);
      ref::mla_attention_absorbed(run.shape, run.q.data(),
                                  StoredKv(run.pool, d_qk, KvDtype::Float32).rows(), slots.data(),
                                  exact.data());
      mla_attention_absorbed(run.shape, run.q.data(), StoredKv(run.pool, d_qk, dtype).rows(),
                             slots.data(), stored.data());
      const double error = relative_error(stored, exact, 1.0);
      EXPECT_LE(error, bound);
      EXPECT_GT(error, 0.0);  // the rounding is there to see: the two pools differ
    }
  }
}

// Rows in the pool that are not this sequence's slots must not influence the result: the
// same slots give the same output whatever the other pool rows hold, and other slots differ.
TEST(AbsorbedAttention, ReadsOnlyTheGivenSlots) {
  const AbsorbedAttention shape{2, 4, 32, 8, 50, 0.5f};
  const int64_t d_qk = 40, pool_rows = 120;
  const std::vector<int32_t> slots = shuffled_slots(50, pool_rows, 18);
  const std::vector<float> q = random_values(static_cast<size_t>(2 * 4 * d_qk), 19);
  for (KvDtype dtype : kKvDtypes) {
    SCOPED_TRACE(kv_dtype_name(dtype));
    std::vector<float> pool = random_values(static_cast<size_t>(pool_rows * d_qk), 20);
    std::vector<float> first(2 * 4 * 32), second(first.size()), other(first.size());
    mla_attention_absorbed(shape, q.data(), StoredKv(pool, d_qk, dtype).rows(), slots.data(),
                           first.data());
    std::vector<bool> used(pool_rows, false);
    for (int32_t s : slots) used[static_cast<size_t>(s)] = true;
    for (int64_t r = 0; r < pool_rows; ++r) {
      if (!used[static_cast<size_t>(r)]) std::fill_n(pool.begin() + r * d_qk, d_qk, 7.0f);
    }
    const StoredKv changed(pool, d_qk, dtype);
    mla_attention_absorbed(shape, q.data(), changed.rows(), slots.data(), second.data());
    EXPECT_EQ(first, second);
    const std::vector<int32_t> other_slots = shuffled_slots(50, pool_rows, 21);
    mla_attention_absorbed(shape, q.data(), changed.rows(), other_slots.data(), other.data());
    EXPECT_NE(first, other);
  }
}

// The thread count decides how many parts a decode token's kv range is split into (1 thread:
// 2 parts, 3 threads: 6, ...); every split must merge to the same softmax.
TEST(AbsorbedAttention, MatchesReferenceForOtherThreadCounts) {
  SKIP_WITHOUT_FAST_PATH(Isa::Avx512);
  const int default_threads = omp_get_max_threads();
  for (int threads : {1, 3}) {
    SCOPED_TRACE(testing::Message() << "threads=" << threads);
    omp_set_num_threads(threads);
    for (KvDtype dtype : kKvDtypes) {
      for (const AbsorbedCase& c :
           {AbsorbedCase{1, 16, 256, 32, 1000}, AbsorbedCase{3, 8, 64, 16, 700}}) {
        const int64_t pool_rows = c.n_kv + 3;
        check_absorbed(c, shuffled_slots(c.n_kv, pool_rows, 25), pool_rows, dtype);
      }
    }
  }
  omp_set_num_threads(default_threads);
}

// Deterministic kernels: each query token of an extend (n_q tokens over a cached prefix) gets
// the same bits as that token decoded alone over its own prefix, whatever the thread count
// (which, outside the mode, splits a lone token's kv range into parts).
TEST(AbsorbedAttention, DeterministicTokensEqualThemselvesDecodedAlone) {
  const DeterministicKernels deterministic;
  const AbsorbedCase c{6, 8, 64, 16, 700};
  const int64_t pool_rows = c.n_kv + 3, d_qk = c.d_latent + c.d_rope;
  const std::vector<int32_t> slots = shuffled_slots(c.n_kv, pool_rows, 27);
  const AbsorbedRun run = random_absorbed(c, pool_rows);
  const int64_t out_row = c.n_heads * c.d_latent;
  const int default_threads = omp_get_max_threads();
  for (KvDtype dtype : kKvDtypes) {
    const StoredKv kv(run.pool, d_qk, dtype);
    std::vector<float> extend(static_cast<size_t>(c.n_q * out_row));
    mla_attention_absorbed(run.shape, run.q.data(), kv.rows(), slots.data(), extend.data());
    for (int threads : {1, 3}) {
      omp_set_num_threads(threads);
      for (int64_t i = 0; i < c.n_q; ++i) {
        AbsorbedAttention alone = run.shape;
        alone.n_q = 1;
        alone.n_kv = c.n_kv - c.n_q + 1 + i;
        std::vector<float> out(static_cast<size_t>(out_row));
        mla_attention_absorbed(alone, run.q.data() + i * c.n_heads * d_qk, kv.rows(), slots.data(),
                               out.data());
        EXPECT_EQ(std::memcmp(out.data(), extend.data() + i * out_row, out.size() * 4), 0)
            << "token " << i << ", kv " << kv_dtype_name(dtype) << ", " << threads << " threads";
      }
    }
  }
  omp_set_num_threads(default_threads);
}

struct PrefillCase {
  int64_t n_tokens, n_heads, d_qk, d_v;
};

TEST(PrefillAttention, MatchesReference) {
  SKIP_WITHOUT_FAST_PATH(Isa::Avx512);
  const PrefillCase cases[] = {{1, 1, 16, 16},     {7, 3, 24, 20}, {33, 8, 96, 64},
                               {100, 2, 192, 128}, {17, 1, 5, 3},  {64, 16, 96, 64},
                               {130, 3, 40, 24}};
  for (const PrefillCase& c : cases) {
    SCOPED_TRACE(testing::Message() << "n_tokens=" << c.n_tokens << " n_heads=" << c.n_heads
                                    << " d_qk=" << c.d_qk << " d_v=" << c.d_v);
    const PrefillAttention shape{c.n_tokens, c.n_heads, c.d_qk, c.d_v,
                                 4.0f / std::sqrt(static_cast<float>(c.d_qk))};
    const size_t rows = static_cast<size_t>(c.n_tokens * c.n_heads);
    const std::vector<float> q = random_values(rows * static_cast<size_t>(c.d_qk), 22);
    const std::vector<float> k = random_values(rows * static_cast<size_t>(c.d_qk), 23);
    const std::vector<float> v = random_values(rows * static_cast<size_t>(c.d_v), 24);
    std::vector<float> expected(rows * static_cast<size_t>(c.d_v)), actual(expected.size(), NAN);
    ref::mla_attention_prefill(shape, q.data(), k.data(), v.data(), expected.data());
    mla_attention_prefill(shape, q.data(), k.data(), v.data(), actual.data());
    expect_not_all_zero(expected);
    EXPECT_LE(relative_error(actual, expected, 1.0), kF32Tolerance);
  }
}

// Every token over its own random selection of earlier tokens (counts from 1 to top_k; the
// first tokens see all they can), heads past one 16-lane group and odd head dims, and a prompt
// long enough that the fast path's blocks of queries and chunks of keys both split it.
TEST(SparsePrefillAttention, MatchesReference) {
  SKIP_WITHOUT_FAST_PATH(Isa::Avx512);
  const PrefillCase cases[] = {{1, 1, 16, 16},   {40, 3, 20, 10},    {70, 16, 96, 64},
                               {33, 17, 24, 20}, {100, 4, 192, 128}, {2600, 2, 20, 12}};
  for (const PrefillCase& c : cases) {
    for (int64_t top_k : {int64_t{1}, int64_t{7}, int64_t{32}, int64_t{700}}) {
      SCOPED_TRACE(testing::Message()
                   << "n_tokens=" << c.n_tokens << " n_heads=" << c.n_heads << " d_qk=" << c.d_qk
                   << " d_v=" << c.d_v << " top_k=" << top_k);
      const PrefillAttention shape{c.n_tokens, c.n_heads, c.d_qk, c.d_v,
                                   4.0f / std::sqrt(static_cast<float>(c.d_qk))};
      std::mt19937 rng(41);
      std::vector<int32_t> selected(static_cast<size_t>(c.n_tokens * top_k), -1);
      std::vector<int32_t> counts(static_cast<size_t>(c.n_tokens));
      for (int64_t i = 0; i < c.n_tokens; ++i) {
        std::vector<int32_t> seen(static_cast<size_t>(i + 1));
        std::iota(seen.begin(), seen.end(), 0);
        std::shuffle(seen.begin(), seen.end(), rng);
        const auto n = static_cast<size_t>(std::min<int64_t>(top_k, i + 1));
        std::sort(seen.begin(), seen.begin() + static_cast<ptrdiff_t>(n));
        std::copy_n(seen.begin(), n, selected.begin() + i * top_k);
        counts[static_cast<size_t>(i)] = static_cast<int32_t>(n);
      }
      const size_t rows = static_cast<size_t>(c.n_tokens * c.n_heads);
      const std::vector<float> q = random_values(rows * static_cast<size_t>(c.d_qk), 42);
      const std::vector<float> k = random_values(rows * static_cast<size_t>(c.d_qk), 43);
      const std::vector<float> v = random_values(rows * static_cast<size_t>(c.d_v), 44);
      std::vector<float> expected(rows * static_cast<size_t>(c.d_v)), actual(expected.size(), NAN);
      ref::mla_attention_prefill_sparse(shape, top_k, q.data(), k.data(), v.data(), selected.data(),
                                        counts.data(), expected.data());
      mla_attention_prefill_sparse(shape, top_k, q.data(), k.data(), v.data(), selected.data(),
                                   counts.data(), actual.data());
      expect_not_all_zero(expected);
      EXPECT_LE(relative_error(actual, expected, 1.0), kF32Tolerance);
    }
  }
}

// rows [n_tokens, n_heads, d] as [n_heads, n_tokens, d].
std::vector<float> head_major(const std::vector<float>& rows, int64_t n_tokens, int64_t n_heads,
                              int64_t d) {
  std::vector<float> out(rows.size());
  for (int64_t t = 0; t < n_tokens; ++t)
    for (int64_t h = 0; h < n_heads; ++h)
      std::copy_n(rows.begin() + (t * n_heads + h) * d, d, out.begin() + (h * n_tokens + t) * d);
  return out;
}

// Selecting every earlier token is dense causal attention.
TEST(SparsePrefillAttention, SelectingEveryTokenIsTheDensePrefill) {
  const int64_t n = 50, heads = 5, d_qk = 24, d_v = 16;
  const PrefillAttention shape{n, heads, d_qk, d_v, 0.5f};
  std::vector<int32_t> selected(static_cast<size_t>(n * n)), counts(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    std::iota(selected.begin() + i * n, selected.begin() + i * n + i + 1, 0);
    counts[static_cast<size_t>(i)] = static_cast<int32_t>(i + 1);
  }
  const std::vector<float> q = random_values(static_cast<size_t>(n * heads * d_qk), 45);
  const std::vector<float> k = random_values(static_cast<size_t>(n * heads * d_qk), 46);
  const std::vector<float> v = random_values(static_cast<size_t>(n * heads * d_v), 47);
  std::vector<float> dense(static_cast<size_t>(n * heads * d_v)), sparse(dense.size(), NAN);
  ref::mla_attention_prefill(shape, q.data(), k.data(), v.data(), dense.data());
  mla_attention_prefill_sparse(shape, n, q.data(), head_major(k, n, heads, d_qk).data(),
                               head_major(v, n, heads, d_v).data(), selected.data(), counts.data(),
                               sparse.data());
  EXPECT_LE(relative_error(sparse, dense, 1.0), kF32Tolerance);
}

// ---- the lightning indexer -----------------------------------------------------------------

struct IndexerCase {
  int64_t n_q, n_heads, head_dim, n_kv, top_k;
};

// Each query's exact scores (double, from the stored keys as decoded) and whether its k-th and
// (k+1)-th differ by at least 1e-5 of its largest score (float32 sums may swap closer pairs) or
// tie exactly at 0.
std::vector<bool> clear_margins(const IndexerCase& c, const std::vector<float>& q,
                                const std::vector<float>& w, const KvRows& keys,
                                const std::vector<int32_t>& slots) {
  std::vector<bool> clear(static_cast<size_t>(c.n_q), true);
  std::vector<float> key(static_cast<size_t>(c.head_dim));
  for (int64_t i = 0; i < c.n_q; ++i) {
    const int64_t visible = c.n_kv - c.n_q + i + 1;
    if (visible <= c.top_k) continue;
    std::vector<double> scores;
    for (int64_t j = 0; j < visible; ++j) {
      decode_kv_row(keys, slots[static_cast<size_t>(j)], key.data());
      double total = 0.0;
      for (int64_t h = 0; h < c.n_heads; ++h) {
        double dot = 0.0;
        for (int64_t d = 0; d < c.head_dim; ++d)
          dot += static_cast<double>(q[static_cast<size_t>((i * c.n_heads + h) * c.head_dim + d)]) *
                 key[static_cast<size_t>(d)];
        total += w[static_cast<size_t>(i * c.n_heads + h)] * std::max(dot, 0.0);
      }
      scores.push_back(total);
    }
    std::sort(scores.begin(), scores.end(), std::greater<>());
    const double gap =
        scores[static_cast<size_t>(c.top_k - 1)] - scores[static_cast<size_t>(c.top_k)];
    // Keys whose heads all clip to 0 score exactly 0 in any sum order: a tie at 0 is exact in
    // float32 too, and both paths break it alike (the earlier position).
    const bool zero_tie = gap == 0.0 && scores[static_cast<size_t>(c.top_k)] == 0.0;
    clear[static_cast<size_t>(i)] = zero_tie || gap >= 1e-5 * std::abs(scores.front());
  }
  return clear;
}

// Fast path against the reference: the same positions for every query whose choice is not a
// near-tie (and at least half of the sparse queries are clear on random data).
// With bf16 activations over a bf16 pool both paths round q (indexer_scores_in_bf16), the fast
// path multiplying by vdpbf16ps: the products are the same exact ones, so are the margins.
void check_indexer(const IndexerCase& c, KvDtype dtype, bool bf16_activations = false) {
  SCOPED_TRACE(testing::Message() << "n_q=" << c.n_q << " heads=" << c.n_heads
                                  << " dim=" << c.head_dim << " n_kv=" << c.n_kv
                                  << " top_k=" << c.top_k << " keys " << kv_dtype_name(dtype)
                                  << (bf16_activations ? " bf16 activations" : ""));
  const int64_t pool_rows = c.n_kv + 7;
  const std::vector<float> q =
      random_values(static_cast<size_t>(c.n_q * c.n_heads * c.head_dim), 31);
  const std::vector<float> w = random_values(static_cast<size_t>(c.n_q * c.n_heads), 32);
  const StoredKv keys(random_values(static_cast<size_t>(pool_rows * c.head_dim), 33), c.head_dim,
                      dtype);
  const std::vector<int32_t> slots = shuffled_slots(c.n_kv, pool_rows, 34);
  const IndexerTopk shape{c.n_q, c.n_heads, c.head_dim, c.n_kv, c.top_k, bf16_activations};
  const size_t n = static_cast<size_t>(c.n_q * c.top_k);
  std::vector<int32_t> expected(n, -1), actual(n, -1), expected_counts(static_cast<size_t>(c.n_q)),
      actual_counts(expected_counts.size(), -1);
  ref::indexer_topk(shape, q.data(), w.data(), keys.rows(), slots.data(), expected.data(),
                    expected_counts.data());
  indexer_topk(shape, q.data(), w.data(), keys.rows(), slots.data(), actual.data(),
               actual_counts.data());
  const std::vector<bool> clear = clear_margins(
      c, indexer_scores_in_bf16(shape, keys.rows()) ? round_to_bf16(q) : q, w, keys.rows(), slots);
  int64_t sparse = 0, compared = 0;
  for (int64_t i = 0; i < c.n_q; ++i) {
    const auto count = static_cast<size_t>(expected_counts[static_cast<size_t>(i)]);
    ASSERT_EQ(actual_counts[static_cast<size_t>(i)], expected_counts[static_cast<size_t>(i)]);
    ASSERT_EQ(count, static_cast<size_t>(std::min(c.top_k, c.n_kv - c.n_q + i + 1)));
    const auto first = static_cast<ptrdiff_t>(i * c.top_k);
    EXPECT_TRUE(std::is_sorted(actual.begin() + first, actual.begin() + first + count));
    sparse += c.n_kv - c.n_q + i + 1 > c.top_k;
    if (!clear[static_cast<size_t>(i)]) continue;
    compared += c.n_kv - c.n_q + i + 1 > c.top_k;
    EXPECT_TRUE(std::equal(actual.begin() + first, actual.begin() + first + count,
                           expected.begin() + first))
        << "query " << i;
  }
  EXPECT_GE(compared * 2, sparse);
}

// Query counts across the prefill (one query per thread item) and decode (a query's keys split
// into parts) paths, key counts around the 32-key block, top_k above and below the context.
TEST(Indexer, TopKMatchesReference) {
  SKIP_WITHOUT_FAST_PATH(Isa::Avx512);
  const IndexerCase cases[] = {{1, 4, 32, 5, 8},      {1, 4, 32, 100, 32},  {3, 3, 20, 77, 16},
                               {40, 4, 32, 40, 32},   {64, 8, 64, 300, 48}, {1, 16, 64, 5000, 256},
                               {2, 5, 33, 3000, 100}, {20, 5, 33, 200, 24}, {7, 1, 16, 33, 1}};
  for (const IndexerCase& c : cases) {
    for (KvDtype dtype : kKvDtypes) check_indexer(c, dtype);
    check_indexer(c, KvDtype::BFloat16, /*bf16_activations=*/true);
  }
}

// Equal scores keep the earlier positions: identical keys give every key the same score.
TEST(Indexer, TiesKeepTheEarlierPositions) {
  for (bool fast : {false, true}) {
    const int64_t n_kv = 3000, top_k = 10, dim = 16;
    const StoredKv keys(std::vector<float>(static_cast<size_t>(n_kv * dim), 0.5f), dim,
                        KvDtype::Float32);
    std::vector<int32_t> slots(static_cast<size_t>(n_kv));
    std::iota(slots.begin(), slots.end(), 0);
    const std::vector<float> q(static_cast<size_t>(2 * dim), 1.0f), w = {1.0f, -0.5f};
    std::vector<int32_t> selected(top_k), count(1);
    const IndexerTopk shape{1, 2, dim, n_kv, top_k};
    (fast ? indexer_topk : ref::indexer_topk)(shape, q.data(), w.data(), keys.rows(), slots.data(),
                                              selected.data(), count.data());
    std::vector<int32_t> first(top_k);
    std::iota(first.begin(), first.end(), 0);
    EXPECT_EQ(selected, first) << (fast ? "fast path" : "reference");
  }
}

// Scores from a few values, many keys sharing each: the k-th best falls inside a run of equal
// scores at every compaction of the candidate buffer, and the earlier positions of that run must
// be the ones kept, as the reference keeps them. One query (its keys split into parts, merged)
// and many (one part each).
TEST(Indexer, TiedScoresAcrossCompactionsKeepTheEarlierPositions) {
  SKIP_WITHOUT_FAST_PATH(Isa::Avx512);
  const int64_t n_kv = 5000, top_k = 300, dim = 16;
  const float levels[] = {0.1f, 0.5f, 0.9f, 0.5f, 0.1f, 0.1f};
  std::vector<float> key_values(static_cast<size_t>(n_kv * dim));
  std::mt19937 rng(41);
  for (int64_t j = 0; j < n_kv; ++j)
    std::fill_n(key_values.begin() + j * dim, dim, levels[rng() % std::size(levels)]);
  const StoredKv keys(key_values, dim, KvDtype::Float32);
  std::vector<int32_t> slots(static_cast<size_t>(n_kv));
  std::iota(slots.begin(), slots.end(), 0);
  for (int64_t n_q : {1, 40}) {
    SCOPED_TRACE(testing::Message() << n_q << " queries");
    const std::vector<float> q(static_cast<size_t>(n_q * 2 * dim), 1.0f);
    const std::vector<float> w(static_cast<size_t>(n_q * 2), 0.5f);
    const IndexerTopk shape{n_q, 2, dim, n_kv, top_k};
    std::vector<int32_t> expected(static_cast<size_t>(n_q * top_k)), actual(expected.size()),
        expected_counts(static_cast<size_t>(n_q)), actual_counts(expected_counts.size());
    ref::indexer_topk(shape, q.data(), w.data(), keys.rows(), slots.data(), expected.data(),
                      expected_counts.data());
    indexer_topk(shape, q.data(), w.data(), keys.rows(), slots.data(), actual.data(),
                 actual_counts.data());
    EXPECT_EQ(actual_counts, expected_counts);
    EXPECT_EQ(actual, expected);
  }
}

// The half-split rotation is the interleaved one on permuted values: (i, i + d/2) -> (2i, 2i+1).
TEST(Indexer, HalfSplitRopeIsInterleavedRopeOnPairedValues) {
  const int64_t dim = 12, half = dim / 2;
  const std::vector<float> x = random_values(dim, 35), angles = random_values(half, 36, 0, 3);
  std::vector<float> cos_t(half), sin_t(half), interleaved(dim), half_split = x;
  for (int64_t i = 0; i < half; ++i) {
    cos_t[i] = std::cos(angles[i]);
    sin_t[i] = std::sin(angles[i]);
    interleaved[2 * i] = x[i];
    interleaved[2 * i + 1] = x[i + half];
  }
  rope_half_split(half_split.data(), 1, dim, dim, cos_t.data(), sin_t.data());
  ref::rope_interleaved(interleaved.data(), 1, dim, dim, cos_t.data(), sin_t.data());
  for (int64_t i = 0; i < half; ++i) {
    EXPECT_FLOAT_EQ(half_split[i], interleaved[2 * i]);
    EXPECT_FLOAT_EQ(half_split[i + half], interleaved[2 * i + 1]);
  }
}

TEST(Indexer, LayerNormCentresScalesAndShifts) {
  const int64_t dim = 32;
  const std::vector<float> x = random_values(2 * dim, 37, -3, 5), gamma(dim, 2.0f),
                           beta(dim, 0.25f);
  std::vector<float> y(x.size());
  layer_norm(x.data(), gamma.data(), beta.data(), 2, dim, 1e-6f, y.data());
  for (int64_t r = 0; r < 2; ++r) {
    double mean = 0, var = 0;
    for (int64_t i = 0; i < dim; ++i) mean += (y[r * dim + i] - 0.25) / 2;
    mean /= dim;
    for (int64_t i = 0; i < dim; ++i) var += std::pow((y[r * dim + i] - 0.25) / 2 - mean, 2);
    EXPECT_NEAR(mean, 0.0, 1e-5);
    EXPECT_NEAR(var / dim, 1.0, 1e-4);
  }
}

}  // namespace
}  // namespace mlaserve::kernels
