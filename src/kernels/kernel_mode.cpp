#include "kernels/cpu_isa.h"
#include "kernels/ops.h"

namespace mlaserve::kernels {

namespace {
bool g_reference_kernels = false;
}

void use_reference_kernels(bool on) {
  g_reference_kernels = on;
}

bool reference_kernels_forced() {
  return g_reference_kernels;
}

}  // namespace mlaserve::kernels
