// Decoding 4-bit weight codes (INT4, MXFP4) to bfloat16 inside the AVX-512 kernels. Every code
// value of both types is exact in bf16 (int4 -8..7; e2m1 ±{0, 0.5, ..., 6}), so the decode is a
// lookup in a 16-entry table of bf16 values (vpermw reads 5 index bits: the table is stored
// twice), exact for every code, as the 8-bit decode of q8_decode.h.
#pragma once

#include <cstdint>

#include "kernels/avx512_util.h"
#include "kernels/ops.h"

namespace mlaserve::kernels {

struct NibbleTable {
  __m512i values;  // bf16 value of code c in lanes c and 16 + c
};

// The table of INT4 or MXFP4 (built once per type).
const NibbleTable& nibble_table(WeightType type);

// Codes [0, count) of a row of 4-bit codes starting at `bytes` (count <= 32, even column first
// in each byte) as 32 bf16 values in column order; lanes past count are +0.
MLASERVE_AVX512 inline __m512i decode_nibbles32(const uint8_t* bytes, int64_t count,
                                                const NibbleTable& table) {
  const __m256i words =
      _mm256_cvtepu8_epi16(_mm_maskz_loadu_epi8(first_lanes16((count + 1) / 2), bytes));
  // ((w << 4) | w) & 0x0f0f: each 16-bit word's low byte becomes its low nibble and its high
  // byte its high nibble, i.e. the codes as bytes in column order.
  const __m256i codes = _mm256_ternarylogic_epi32(_mm256_slli_epi16(words, 4), words,
                                                  _mm256_set1_epi16(0x0f0f), 0xA8);
  return _mm512_maskz_permutexvar_epi16(first_lanes32(count), _mm512_cvtepu8_epi16(codes),
                                        table.values);
}

}  // namespace mlaserve::kernels
