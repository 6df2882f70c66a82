// The GEMM probe times both paths on this CPU: rates must be real (positive, finite, under any
// CPU's peak), the choice the faster of each class, and the process's choice left as it was.
#include "kernels/gemm_probe.h"

#include <gtest/gtest.h>

#include <cmath>

#include "kernels/cpu_isa.h"
#include "kernels/kernel_mode_test_util.h"

namespace mlaserve::kernels {
namespace {

void expect_plausible(const GemmRates& r) {
  for (double rate : {r.bf16_gflops, r.f32_gflops}) {
    EXPECT_TRUE(std::isfinite(rate));
    EXPECT_GT(rate, 0.1);
    EXPECT_LT(rate, 1e6);  // a petaflop on one rank's cores would be a timing error
  }
}

TEST(GemmProbe, MeasuresBothPathsAndRestoresTheChoice) {
  if (!cpu_has_avx512_bf16()) GTEST_SKIP() << "the bf16 path needs AVX512_BF16";
  const ScopedGemmChoice before({GemmPath::F32Widened, GemmPath::Bf16Dot});
  const GemmProbe probe = probe_gemm_paths();
  expect_plausible(probe.mid);
  expect_plausible(probe.large);
  EXPECT_EQ(gemm_choice().mid, GemmPath::F32Widened);
  EXPECT_EQ(gemm_choice().large, GemmPath::Bf16Dot);
}

TEST(GemmProbe, ChoosesTheFasterPathOfEachClass) {
  const GemmChoice choice = faster_paths({{100, 120}, {300, 200}});
  EXPECT_EQ(choice.mid, GemmPath::F32Widened);
  EXPECT_EQ(choice.large, GemmPath::Bf16Dot);
  EXPECT_EQ(faster_paths({{50, 40}, {10, 90}}).large, GemmPath::F32Widened);
}

}  // namespace
}  // namespace mlaserve::kernels
