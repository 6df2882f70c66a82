#include "core/kv_dtype.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "core/numeric.h"

namespace mlaserve {
namespace {

// A row like a latent: c_kv of order 1 and k_pe of a different order, and a few zeros.
std::vector<float> latent_like_row(int64_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> row(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) row[static_cast<size_t>(i)] = normal(rng) * (i < n - 8 ? 1 : 30);
  row[3] = 0.0f;
  return row;
}

struct Encoded {
  std::vector<uint8_t> values;
  float scale = 0.0f;
};

Encoded encode(KvDtype dtype, const std::vector<float>& row) {
  const auto n = static_cast<int64_t>(row.size());
  Encoded e{std::vector<uint8_t>(static_cast<size_t>(n * kv_value_bytes(dtype)), 0xcc), NAN};
  encode_kv_row(dtype, row.data(), n, e.values.data(), &e.scale);
  return e;
}

std::vector<float> decode(KvDtype dtype, const Encoded& e, int64_t n) {
  std::vector<float> out(static_cast<size_t>(n), NAN);
  decode_kv_row({dtype, n, e.values.data(), &e.scale}, 0, out.data());
  return out;
}

TEST(KvDtype, NamesAndSizes) {
  EXPECT_EQ(kv_dtype_name(KvDtype::BFloat16), "bfloat16");
  EXPECT_EQ(kv_dtype_name(KvDtype::Fp8E4m3), "fp8_e4m3");
  EXPECT_EQ(kv_row_bytes(KvDtype::Float32, 576), 2304);
  EXPECT_EQ(kv_row_bytes(KvDtype::BFloat16, 576), 1152);
  EXPECT_EQ(kv_row_bytes(KvDtype::Fp8E4m3, 576), 580);  // the row's float32 scale included
}

TEST(KvDtype, Float32RoundTripsExactly) {
  const std::vector<float> row = latent_like_row(37, 1);
  EXPECT_EQ(decode(KvDtype::Float32, encode(KvDtype::Float32, row), 37), row);
}

// bf16 is round to nearest even of every value, as f32_to_bf16 does it.
TEST(KvDtype, BFloat16IsRoundedPerValue) {
  const std::vector<float> row = latent_like_row(37, 2);
  const std::vector<float> got = decode(KvDtype::BFloat16, encode(KvDtype::BFloat16, row), 37);
  for (size_t i = 0; i < row.size(); ++i) {
    EXPECT_EQ(got[i], bf16_to_f32(f32_to_bf16(row[i])));
    EXPECT_LE(std::fabs(got[i] - row[i]), std::ldexp(std::fabs(row[i]), -8));
  }
}

// fp8: the scale maps the largest magnitude to 448; each value is within half an e4m3 step of
// itself (relative 2^-4, or the subnormal step 2^-9 of the scale for tiny values).
TEST(KvDtype, Fp8ScalesTheRowAndRoundsEachValue) {
  const int64_t n = 45;
  const std::vector<float> row = latent_like_row(n, 3);
  const Encoded e = encode(KvDtype::Fp8E4m3, row);
  float max_abs = 0.0f;
  for (float x : row) max_abs = std::max(max_abs, std::fabs(x));
  EXPECT_FLOAT_EQ(e.scale, max_abs / 448.0f);
  const std::vector<float> got = decode(KvDtype::Fp8E4m3, e, n);
  for (size_t i = 0; i < row.size(); ++i) {
    const float bound = std::max(std::ldexp(std::fabs(row[i]), -4), std::ldexp(e.scale, -10));
    EXPECT_LE(std::fabs(got[i] - row[i]), bound) << i;
    EXPECT_EQ(got[i], fp8_e4m3_to_f32(f32_to_fp8_e4m3(row[i] / e.scale)) * e.scale);
  }
  EXPECT_EQ(got[3], 0.0f);
}

TEST(KvDtype, Fp8AllZeroRowDecodesToZeros) {
  const std::vector<float> row(9, 0.0f);
  EXPECT_EQ(decode(KvDtype::Fp8E4m3, encode(KvDtype::Fp8E4m3, row), 9), row);
}

}  // namespace
}  // namespace mlaserve
