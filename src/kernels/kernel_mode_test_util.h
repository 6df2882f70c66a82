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

// The kernels of a CPU without AVX512_BF16 (hide_avx512_bf16).
class HiddenAvx512Bf16 {
 public:
  HiddenAvx512Bf16() { hide_avx512_bf16(true); }
  ~HiddenAvx512Bf16() { hide_avx512_bf16(false); }
  HiddenAvx512Bf16(const HiddenAvx512Bf16&) = delete;
  HiddenAvx512Bf16& operator=(const HiddenAvx512Bf16&) = delete;
};

// The kernels of a CPU with AVX2 but no AVX-512 (hide_avx512).
class HiddenAvx512 {
 public:
  HiddenAvx512() { hide_avx512(true); }
  ~HiddenAvx512() { hide_avx512(false); }
  HiddenAvx512(const HiddenAvx512&) = delete;
  HiddenAvx512& operator=(const HiddenAvx512&) = delete;
};

}  // namespace mlaserve::kernels
