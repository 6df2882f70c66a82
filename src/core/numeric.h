// Scalar number formats used by checkpoints: bfloat16 and float8 e4m3fn.
#pragma once

#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>

namespace mlaserve {

using bf16 = uint16_t;  // raw bfloat16 bits

inline float bf16_to_f32(bf16 v) {
  uint32_t bits = static_cast<uint32_t>(v) << 16;
  float f;
  std::memcpy(&f, &bits, sizeof f);
  return f;
}

// Round to nearest even, NaN kept quiet (what PyTorch and oneDNN do).
inline bf16 f32_to_bf16(float f) {
  uint32_t bits;
  std::memcpy(&bits, &f, sizeof bits);
  if ((bits & 0x7fffffffu) > 0x7f800000u) return static_cast<bf16>((bits >> 16) | 0x40u);
  bits += 0x7fffu + ((bits >> 16) & 1u);
  return static_cast<bf16>(bits >> 16);
}

// float8 e4m3fn: 1 sign, 4 exponent (bias 7), 3 mantissa bits; no infinities, 0x7f/0xff are NaN.
constexpr float kFp8E4m3Max = 448.0f;  // largest finite value
float fp8_e4m3_to_f32(uint8_t v);

// Nearest e4m3fn value (round to nearest even, saturating at +-448; NaN stays NaN). Used by
// make-model and by FP8 quantization at load.
uint8_t f32_to_fp8_e4m3(float f);

// E8M0 (OCP MX scales, DeepSeek-V4's `scale_fmt: ue8m0`): a byte e stands for 2^(e - 127); 255
// is NaN. f32_to_e8m0 takes a power of two in [2^-127, 2^127]. e goes straight into a float's
// exponent field (the loader reads an FP8 tensor's block scale per value it dequantizes); e = 0,
// 2^-127, is the subnormal with the top mantissa bit.
inline float e8m0_to_f32(uint8_t e) {
  return std::bit_cast<float>(e == 0 ? 0x00400000u : uint32_t{e} << 23);
}
inline uint8_t f32_to_e8m0(float power_of_two) {
  return static_cast<uint8_t>(std::ilogb(power_of_two) + 127);
}

// The scale of symmetric quantization that maps max_abs onto max_code (e.g. kFp8E4m3Max, 127);
// 1 when max_abs is 0, whose values then all encode as zero.
inline float symmetric_scale(float max_abs, float max_code) {
  return max_abs > 0.0f ? max_abs / max_code : 1.0f;
}

}  // namespace mlaserve
