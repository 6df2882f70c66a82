#include "core/numeric.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

namespace mlaserve {
namespace {

TEST(Numeric, Bf16RoundTripsAndRoundsToNearestEven) {
  EXPECT_EQ(bf16_to_f32(f32_to_bf16(1.0f)), 1.0f);
  EXPECT_EQ(bf16_to_f32(f32_to_bf16(-2.5f)), -2.5f);
  // 1 + 2^-8 is exactly half way between 1 and 1 + 2^-7: ties to even gives 1.
  EXPECT_EQ(bf16_to_f32(f32_to_bf16(1.0f + std::ldexp(1.0f, -8))), 1.0f);
  // 1 + 3*2^-8 is half way between 1+2^-7 and 1+2^-6: ties to even gives 1+2^-6.
  EXPECT_EQ(bf16_to_f32(f32_to_bf16(1.0f + 3 * std::ldexp(1.0f, -8))), 1.0f + std::ldexp(1.0f, -6));
  EXPECT_TRUE(std::isnan(bf16_to_f32(f32_to_bf16(NAN))));
}

TEST(Numeric, Fp8E4m3DecodesKnownCodes) {
  EXPECT_EQ(fp8_e4m3_to_f32(0x00), 0.0f);
  EXPECT_EQ(fp8_e4m3_to_f32(0x38), 1.0f);    // exponent 7, mantissa 0
  EXPECT_EQ(fp8_e4m3_to_f32(0x7e), 448.0f);  // largest finite
  EXPECT_EQ(fp8_e4m3_to_f32(0xb8), -1.0f);
  EXPECT_EQ(fp8_e4m3_to_f32(0x01), std::ldexp(1.0f, -9));  // smallest subnormal
  EXPECT_TRUE(std::isnan(fp8_e4m3_to_f32(0x7f)));
  EXPECT_TRUE(std::isnan(fp8_e4m3_to_f32(0xff)));
}

TEST(Numeric, Fp8EncodeIsInverseOfDecodeOnEveryFiniteCode) {
  for (int code = 0; code < 256; ++code) {
    if ((code & 0x7f) == 0x7f) continue;
    if (code == 0x80) continue;  // -0 encodes back as -0 = 0x80; skip the sign-of-zero detail
    EXPECT_EQ(f32_to_fp8_e4m3(fp8_e4m3_to_f32(static_cast<uint8_t>(code))), code) << code;
  }
  EXPECT_EQ(f32_to_fp8_e4m3(1000.0f), 0x7e);  // saturates
}

// The nearest code by exhaustive search over the finite codes, ties to the even code.
uint8_t nearest_code(float f) {
  uint8_t best = 0;
  float best_error = INFINITY;
  for (uint8_t code = 0; code < 0x7f; ++code) {
    const float error = std::fabs(fp8_e4m3_to_f32(code) - std::fabs(f));
    if (error < best_error || (error == best_error && (code & 1) == 0)) {
      best_error = error;
      best = code;
    }
  }
  return (std::signbit(f) ? 0x80 : 0x00) | best;
}

TEST(Numeric, Fp8EncodeRoundsToNearestEvenLikeExhaustiveSearch) {
  std::vector<float> values;
  for (int code = 0; code < 0x7f; ++code) {  // every code, its midpoints and their neighbours
    const float v = fp8_e4m3_to_f32(static_cast<uint8_t>(code));
    const float next = code < 0x7e ? fp8_e4m3_to_f32(static_cast<uint8_t>(code + 1)) : 480.0f;
    const float mid = (v + next) / 2;
    for (float x : {v, mid, std::nextafter(mid, 0.0f), std::nextafter(mid, INFINITY)}) {
      values.push_back(x);
      values.push_back(-x);
    }
  }
  std::mt19937 rng(3);
  std::uniform_real_distribution<float> exponent(-14.0f, 9.5f);
  for (int i = 0; i < 20000; ++i) values.push_back(std::exp2(exponent(rng)) * (i % 2 ? 1 : -1));
  for (float v : values) EXPECT_EQ(f32_to_fp8_e4m3(v), nearest_code(v)) << v;
  EXPECT_EQ(f32_to_fp8_e4m3(NAN) & 0x7f, 0x7f);
}

// Every E8M0 byte decodes to 2^(e - 127) (the subnormal 2^-127 and the largest, 2^127,
// included), and every power of two encodes back to its byte.
TEST(Numeric, E8m0BytesArePowersOfTwo) {
  for (int e = 0; e < 255; ++e) {
    const float v = e8m0_to_f32(static_cast<uint8_t>(e));
    EXPECT_EQ(v, std::ldexp(1.0f, e - 127)) << e;
    EXPECT_EQ(f32_to_e8m0(v), e) << e;
  }
}

}  // namespace
}  // namespace mlaserve
