#include <optional>

#include "kernels/cpu_isa.h"
#include "kernels/ops.h"

namespace mlaserve::kernels {

namespace {
bool g_reference_kernels = false;
bool g_deterministic_kernels = false;
bool g_weight_packing = true;
bool g_avx512_bf16_hidden = false;
bool g_avx512_hidden = false;
std::optional<GemmChoice> g_gemm_choice;
}  // namespace

void use_reference_kernels(bool on) {
  g_reference_kernels = on;
}

bool reference_kernels_forced() {
  return g_reference_kernels;
}

void hide_avx512_bf16(bool on) {
  g_avx512_bf16_hidden = on;
}

bool avx512_bf16_hidden() {
  return g_avx512_bf16_hidden;
}

void hide_avx512(bool on) {
  g_avx512_hidden = on;
}

bool avx512_hidden() {
  return g_avx512_hidden;
}

void use_deterministic_kernels(bool on) {
  g_deterministic_kernels = on;
}

bool deterministic_kernels() {
  return g_deterministic_kernels;
}

void use_weight_packing(bool on) {
  g_weight_packing = on;
}

bool weight_packing() {
  return g_weight_packing;
}

const char* gemm_path_name(GemmPath path) {
  return path == GemmPath::Bf16Dot ? "bf16" : "f32";
}

void use_gemm_choice(GemmChoice choice) {
  g_gemm_choice = choice;
}

bool gemm_choice_made() {
  return g_gemm_choice.has_value();
}

GemmChoice gemm_choice() {
  if (!cpu_has_avx512_bf16()) return {GemmPath::F32Widened, GemmPath::F32Widened};
  return g_gemm_choice.value_or(GemmChoice{});
}

GemmPath gemm_path(int64_t m) {
  const GemmChoice choice = gemm_choice();
  return m < kLargeGemmRows ? choice.mid : choice.large;
}

bool packs(WeightType type) {
  if (!g_weight_packing || g_reference_kernels || g_deterministic_kernels) return false;
  if (type == WeightType::F32) return true;
  const GemmChoice choice = gemm_choice();
  return type == WeightType::BF16 &&
         (choice.mid == GemmPath::Bf16Dot || choice.large == GemmPath::Bf16Dot);
}

}  // namespace mlaserve::kernels
