// Decoding FP8/INT8 weight codes to bfloat16 inside the AVX-512 kernels. A code is sign-
// magnitude (bit 7 the sign, bits 0-6 an index into a 128-entry table of magnitudes), which
// covers e4m3fn and our sign-magnitude int8 alike. Every magnitude is exact in bf16 (e4m3 has 4
// significant bits and exponents 2^-9..2^8; |int8| <= 127), so the decode is a table lookup,
// exact for every code, subnormal e4m3 and NaN included, where arithmetic tricks (shifting the
// e4m3 bits into a float's and rescaling by 2^120) meet bf16 denormals that vdpbf16ps flushes.
#pragma once

#include <cstdint>

#include "kernels/avx512_util.h"
#include "kernels/ops.h"

namespace mlaserve::kernels {

// The 128 magnitudes of a weight type as bf16, in the four 32-entry vectors vpermi2w reads.
struct DecodeTable {
  __m512i entries[4];  // magnitudes of codes 0-31, 32-63, 64-95, 96-127
};

// The table of an FP8 or INT8 weight type (built once per type).
const DecodeTable& decode_table(WeightType type);

// 32 codes (bytes, zero-extended to 16-bit lanes) to 32 bf16 values.
MLASERVE_AVX512 inline __m512i decode_codes(__m512i codes, const DecodeTable& table) {
  // vpermi2w indexes 64 entries with bits 0-5; bit 6 picks the table half.
  const __m512i low = _mm512_permutex2var_epi16(table.entries[0], codes, table.entries[1]);
  const __m512i high = _mm512_permutex2var_epi16(table.entries[2], codes, table.entries[3]);
  const __mmask32 upper = _mm512_test_epi16_mask(codes, _mm512_set1_epi16(0x40));
  const __m512i magnitude = _mm512_mask_blend_epi16(upper, low, high);
  // magnitude | (code << 8 & 0x8000): the code's bit 7 becomes the bf16 sign bit.
  return _mm512_ternarylogic_epi32(magnitude, _mm512_slli_epi16(codes, 8),
                                   _mm512_set1_epi16(static_cast<int16_t>(0x8000)), 0xF8);
}

// The GEMV's faster decode, 64 codes at a time: the high and the low byte of each magnitude's
// bf16 bits looked up by vpermi2b, which indexes 128 bytes by bits 0-6 of each code (bit 7, the
// sign, is ignored), the sign merged into the high byte, and the bytes interleaved into bf16
// lanes. Two byte permutes and two unpacks per 64 codes instead of four word permutes, two
// widenings and two blends: ~37 vs ~20 GB/s of codes per Zen 5 core, so the GEMV keeps up with
// the memory. The unpacks leave the values in quads: `first` holds codes 0-7, 16-23, 32-39 and
// 48-55, `second` codes 8-15, 24-31, 40-47 and 56-63; interleave_like_codes() arranges x alike.
struct ByteDecodeTable {
  __m512i high[2];  // high bytes of the magnitudes of codes 0-63, 64-127
  __m512i low[2];   // low bytes
};
const ByteDecodeTable& byte_decode_table(WeightType type);

MLASERVE_AVX512_VBMI_BF16 inline void decode_codes64(__m512i codes, const ByteDecodeTable& table,
                                                     __m512i& first, __m512i& second) {
  const __m512i high = _mm512_permutex2var_epi8(table.high[0], codes, table.high[1]);
  const __m512i low = _mm512_permutex2var_epi8(table.low[0], codes, table.low[1]);
  // high | (code & 0x80): the code's sign becomes the bf16 sign bit.
  const __m512i signed_high =
      _mm512_ternarylogic_epi32(high, codes, _mm512_set1_epi8(static_cast<char>(0x80)), 0xF8);
  first = _mm512_unpacklo_epi8(low, signed_high);
  second = _mm512_unpackhi_epi8(low, signed_high);
}

// x[0, 64) as bf16 (x0 = x[0, 32), x1 = x[32, 64)) in decode_codes64's order.
MLASERVE_AVX512_VBMI_BF16 inline void interleave_like_codes(__m512i x0, __m512i x1, __m512bh& first,
                                                            __m512bh& second) {
  // 64-bit pieces: pieces 0,1 of x0 are x 0-7, pieces 4,5 x 16-23; 8+ index x1.
  first = (__m512bh)_mm512_permutex2var_epi64(x0, _mm512_setr_epi64(0, 1, 4, 5, 8, 9, 12, 13), x1);
  second =
      (__m512bh)_mm512_permutex2var_epi64(x0, _mm512_setr_epi64(2, 3, 6, 7, 10, 11, 14, 15), x1);
}

// Codes [0, count) of p (count <= 32; lanes past count decode code 0, i.e. +0).
MLASERVE_AVX512 inline __m512i load_codes(const uint8_t* p, int64_t count) {
  if (count >= 32)
    return _mm512_cvtepu8_epi16(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
  return _mm512_cvtepu8_epi16(_mm256_maskz_loadu_epi8(first_lanes32(count), p));
}

}  // namespace mlaserve::kernels
