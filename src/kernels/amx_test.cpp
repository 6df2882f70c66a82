// amx_packed_panel against a scalar product read straight from the packed layout's definition
// (element (k, n) of a 64-row block at (k / 32) * 2048 + (k % 32 / 2) * 128 + n * 2 + k % 2),
// over x rows that fill whole tiles and end mid-tile, blocks that end before 64 rows, and K
// over one and several passes of chunks.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "kernels/cpu_isa.h"
#include "kernels/gemv.h"

namespace mlaserve::kernels {
namespace {

std::vector<bf16> random_bf16(int64_t count, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> value(-1.0f, 1.0f);
  std::vector<bf16> out(static_cast<size_t>(count));
  for (bf16& v : out) v = f32_to_bf16(value(rng));
  return out;
}

double packed_value(const std::vector<bf16>& block, int64_t k, int64_t n) {
  return bf16_to_f32(block[static_cast<size_t>(k / 32 * 2048 + k % 32 / 2 * 128 + n * 2 + k % 2)]);
}

TEST(AmxPackedPanel, MatchesTheLayoutsScalarProduct) {
  if (!cpu_has_amx_bf16()) GTEST_SKIP() << "this CPU (or its kernel) gives no AMX-BF16 tiles";
  struct Case {
    int64_t m, k_padded, rows;
  };
  for (const Case c : {Case{1, 32, 64}, Case{16, 64, 64}, Case{17, 256, 37}, Case{40, 320, 64},
                       Case{100, 1056, 5}, Case{33, 7168, 64}}) {
    SCOPED_TRACE(testing::Message() << "m=" << c.m << " k=" << c.k_padded << " rows=" << c.rows);
    const std::vector<bf16> block = random_bf16(c.k_padded * 64, 3);
    const std::vector<bf16> x = random_bf16(c.m * c.k_padded, 4);
    const int64_t ldy = c.rows + 3;  // y rows wider than the block: columns past `rows` kept
    std::vector<float> y(static_cast<size_t>(c.m * ldy), -7.0f);
    amx_packed_panel(block.data(), c.k_padded, x.data(), c.m, y.data(), ldy, c.rows);
    for (int64_t i = 0; i < c.m; ++i) {
      for (int64_t n = 0; n < ldy; ++n) {
        const float actual = y[static_cast<size_t>(i * ldy + n)];
        if (n >= c.rows) {
          ASSERT_EQ(actual, -7.0f) << "row " << i << " column " << n;
          continue;
        }
        double expected = 0, magnitude = 0;
        for (int64_t k = 0; k < c.k_padded; ++k) {
          const double product =
              bf16_to_f32(x[static_cast<size_t>(i * c.k_padded + k)]) * packed_value(block, k, n);
          expected += product;
          magnitude += std::fabs(product);
        }
        ASSERT_NEAR(actual, expected, 1e-5 * magnitude) << "row " << i << " column " << n;
      }
    }
  }
}

}  // namespace
}  // namespace mlaserve::kernels
