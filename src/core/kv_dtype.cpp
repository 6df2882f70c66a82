#include "core/kv_dtype.h"

#include <algorithm>
#include <cmath>

#include "core/error.h"
#include "core/numeric.h"

namespace mlaserve {

namespace {

float fp8_row_scale(const float* src, int64_t n) {
  float max_abs = 0.0f;
  for (int64_t i = 0; i < n; ++i) max_abs = std::max(max_abs, std::fabs(src[i]));
  return symmetric_scale(max_abs, kFp8E4m3Max);
}

}  // namespace

std::string_view kv_dtype_name(KvDtype dtype) {
  switch (dtype) {
    case KvDtype::Float32:
      return "float32";
    case KvDtype::BFloat16:
      return "bfloat16";
    case KvDtype::Fp8E4m3:
      return "fp8_e4m3";
  }
  fail("internal: unknown KvDtype {}", static_cast<int>(dtype));
}

int64_t kv_value_bytes(KvDtype dtype) {
  switch (dtype) {
    case KvDtype::Float32:
      return 4;
    case KvDtype::BFloat16:
      return 2;
    case KvDtype::Fp8E4m3:
      return 1;
  }
  fail("internal: unknown KvDtype {}", static_cast<int>(dtype));
}

int64_t kv_row_bytes(KvDtype dtype, int64_t row_dim) {
  const int64_t scale_bytes = dtype == KvDtype::Fp8E4m3 ? int64_t{sizeof(float)} : 0;
  return row_dim * kv_value_bytes(dtype) + scale_bytes;
}

void encode_kv_row(KvDtype dtype, const float* src, int64_t row_dim, void* dst, float* scale) {
  switch (dtype) {
    case KvDtype::Float32:
      std::copy_n(src, row_dim, static_cast<float*>(dst));
      return;
    case KvDtype::BFloat16:
      std::transform(src, src + row_dim, static_cast<bf16*>(dst), f32_to_bf16);
      return;
    case KvDtype::Fp8E4m3: {
      const float s = fp8_row_scale(src, row_dim);
      *scale = s;
      std::transform(src, src + row_dim, static_cast<uint8_t*>(dst),
                     [s](float x) { return f32_to_fp8_e4m3(x / s); });
      return;
    }
  }
}

void decode_kv_row(const KvRows& rows, int64_t i, float* dst) {
  const uint8_t* row = rows.row(i);
  switch (rows.dtype) {
    case KvDtype::Float32:
      std::copy_n(reinterpret_cast<const float*>(row), rows.row_dim, dst);
      return;
    case KvDtype::BFloat16:
      std::transform(reinterpret_cast<const bf16*>(row),
                     reinterpret_cast<const bf16*>(row) + rows.row_dim, dst, bf16_to_f32);
      return;
    case KvDtype::Fp8E4m3: {
      const float s = rows.scales[i];
      std::transform(row, row + rows.row_dim, dst,
                     [s](uint8_t code) { return fp8_e4m3_to_f32(code) * s; });
      return;
    }
  }
}

}  // namespace mlaserve
