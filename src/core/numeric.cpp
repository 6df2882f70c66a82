#include "core/numeric.h"

#include <algorithm>
#include <cmath>
#include <cstring>
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
  const uint8_t sign = std::signbit(f) ? 0x80 : 0x00;
  const float a = std::fabs(f);
  if (std::isnan(f)) return sign | 0x7f;
  if (a >= kFp8E4m3Max) return sign | 0x7e;  // saturate: e4m3fn has no infinity
  if (a < 0.015625f) {
    // Below the smallest normal 2^-6 the codes are multiples of 2^-9 (code = m; m = 8 is the
    // smallest normal's code); nearbyint rounds half to even, and a·2^9 is exact.
    return sign | static_cast<uint8_t>(std::nearbyint(a * 512.0f));
  }
  // Normal: keep 3 of float's 23 mantissa bits, rounding half to even on the dropped 20; a carry
  // moves into the exponent as it should. e4m3's exponent bias is 7, float's 127.
  uint32_t bits;
  std::memcpy(&bits, &a, sizeof bits);
  bits += 0x7ffffu + ((bits >> 20) & 1u);
  const uint32_t exponent = (bits >> 23) - 127 + 7, mantissa = (bits >> 20) & 7u;
  return sign | static_cast<uint8_t>(std::min<uint32_t>((exponent << 3) | mantissa, 0x7e));
}

}  // namespace mlaserve
