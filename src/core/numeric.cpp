#include "core/numeric.h"

#include <cmath>
#include <limits>

namespace mlaserve {

float fp8_e4m3_to_f32(uint8_t v) {
  const int sign = v >> 7;
  const int exponent = (v >> 3) & 0xf;
  const int mantissa = v & 0x7;
  if (exponent == 0xf && mantissa == 0x7) return std::numeric_limits<float>::quiet_NaN();
  float magnitude = exponent == 0 ? std::ldexp(static_cast<float>(mantissa), -9)  // subnormal
                                  : std::ldexp(1.0f + mantissa / 8.0f, exponent - 7);
  return sign ? -magnitude : magnitude;
}

uint8_t f32_to_fp8_e4m3(float f) {
  // Exhaustive search over the 127 non-negative finite codes: simple and exact; make-model only.
  const uint8_t sign = std::signbit(f) ? 0x80 : 0x00;
  const float target = std::fabs(f);
  uint8_t best = 0;
  float best_error = std::numeric_limits<float>::infinity();
  for (uint8_t code = 0; code < 0x7f; ++code) {
    float error = std::fabs(fp8_e4m3_to_f32(code) - target);
    // Ties go to the even code (the one with a zero last mantissa bit).
    if (error < best_error || (error == best_error && (code & 1) == 0)) {
      best_error = error;
      best = code;
    }
  }
  return sign | best;
}

}  // namespace mlaserve
