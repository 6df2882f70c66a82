// A GEMM path choice (ops.h use_gemm_choice) for one scope of a kernel test.
#pragma once

#include "kernels/ops.h"

namespace mlaserve::kernels {

class ScopedGemmChoice {
 public:
  explicit ScopedGemmChoice(GemmChoice choice) : before_(gemm_choice()) { use_gemm_choice(choice); }
  ~ScopedGemmChoice() { use_gemm_choice(before_); }
  ScopedGemmChoice(const ScopedGemmChoice&) = delete;
  ScopedGemmChoice& operator=(const ScopedGemmChoice&) = delete;

 private:
  GemmChoice before_;
};

}  // namespace mlaserve::kernels
