#include "kernels/cpu_isa.h"
#include "kernels/ops.h"

namespace mlaserve::kernels {

namespace {
bool g_reference_kernels = false;
bool g_deterministic_kernels = false;
bool g_weight_packing = true;
}  // namespace

void use_reference_kernels(bool on) {
  g_reference_kernels = on;
}

bool reference_kernels_forced() {
  return g_reference_kernels;
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

}  // namespace mlaserve::kernels
