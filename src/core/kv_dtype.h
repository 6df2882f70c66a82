// How the latent KV cache stores its rows (--kv-cache-dtype), and the scalar row codec that
// defines each format: the KV pool encodes rows with it, the reference attention decodes them
// with it, and the fast attention's vector decode must give the same floats.
//
// fp8_e4m3 rows carry one float32 scale each (one per token per layer): scale = max|x| / 448,
// values x / scale rounded to the nearest e4m3fn value (ties to even), so a row's largest value
// maps to e4m3's largest, 448. Why per row, not one fixed per-tensor scale (SGLang's k_scale):
// a row's scale is known when it is written, so no calibration pass is needed and no value
// saturates; every value at least max|x| / 2^15 keeps e4m3's 2^-4 relative precision. The scale
// costs 4 bytes beside the 576 of a V3 row (0.7 %).
#pragma once

#include <cstdint>
#include <string_view>

namespace mlaserve {

enum class KvDtype { Float32, BFloat16, Fp8E4m3 };

std::string_view kv_dtype_name(KvDtype dtype);  // "float32", "bfloat16", "fp8_e4m3"
int64_t kv_value_bytes(KvDtype dtype);          // 4, 2, 1
// Bytes a row of row_dim values takes in the cache, its scale included.
int64_t kv_row_bytes(KvDtype dtype, int64_t row_dim);

// Read-only view of stored rows: [n_rows, row_dim] values of dtype (raw bf16 bits, e4m3fn
// codes) and, for fp8_e4m3 only, [n_rows] float32 scales.
struct KvRows {
  KvDtype dtype = KvDtype::Float32;
  int64_t row_dim = 0;
  const void* values = nullptr;
  const float* scales = nullptr;

  const uint8_t* row(int64_t i) const {
    return static_cast<const uint8_t*>(values) + i * row_dim * kv_value_bytes(dtype);
  }
};

// Encodes src[0, row_dim) into dst (row_dim values of dtype); fp8_e4m3 also writes *scale.
void encode_kv_row(KvDtype dtype, const float* src, int64_t row_dim, void* dst, float* scale);

// dst[0, row_dim) = row i of rows, decoded to float32.
void decode_kv_row(const KvRows& rows, int64_t i, float* dst);

}  // namespace mlaserve
