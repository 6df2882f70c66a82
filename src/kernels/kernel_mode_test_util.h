// Kernel modes (ops.h) switched for one scope of a kernel test.
#pragma once

#include "kernels/ops.h"

namespace mlaserve::kernels {

// A GEMM path choice (use_gemm_choice).
class ScopedGemmChoice {
 public:
  explicit ScopedGemmChoice(GemmChoice choice) : before_(gemm_choice()) { use_gemm_choice(choice); }
  ~ScopedGemmChoice() { use_gemm_choice(before_); }
  ScopedGemmChoice(const ScopedGemmChoice&) = delete;
  ScopedGemmChoice& operator=(const ScopedGemmChoice&) = delete;

 private:
  GemmChoice before_;
};

// A kernel mode that a setter switches on, for one scope.
template <void (*kSet)(bool)>
class ScopedMode {
 public:
  ScopedMode() { kSet(true); }
  ~ScopedMode() { kSet(false); }
  ScopedMode(const ScopedMode&) = delete;
  ScopedMode& operator=(const ScopedMode&) = delete;
};

using DeterministicKernels = ScopedMode<use_deterministic_kernels>;
using HiddenAvx512Bf16 = ScopedMode<hide_avx512_bf16>;  // a CPU without AVX512_BF16
using HiddenAvx512 = ScopedMode<hide_avx512>;           // a CPU with AVX2 but no AVX-512

}  // namespace mlaserve::kernels
