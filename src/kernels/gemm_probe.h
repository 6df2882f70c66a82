// A short timed run of each GEMM path (ops.h GemmPath) on this CPU, so that the start-up can
// choose the faster one per shape class instead of trusting the CPU's feature flags.
#pragma once

#include <string>

#include "kernels/ops.h"

namespace mlaserve::kernels {

// Measured rate of each path on one shape class, GFLOP/s over the kernels' threads.
struct GemmRates {
  double bf16_gflops = 0;
  double f32_gflops = 0;
};

struct GemmProbe {
  GemmRates mid;    // m = kProbeMidRows
  GemmRates large;  // m = kProbeLargeRows
};

// The probe's shapes: x[m, 2048] times a [1024, 2048] bf16 weight (4 MB, a widened panel of
// 8 MB), the size class of DeepSeek's expert and attention projections; m = 32 stands for the
// experts of a decode batch, 256 for prefill.
constexpr int64_t kProbeMidRows = 32;
constexpr int64_t kProbeLargeRows = 256;

// Times both paths on both classes through matmul(), i.e. the kernels serving runs (about 0.3 s
// in all). Needs cpu_has_avx512_bf16(); restores the GEMM choice it found.
GemmProbe probe_gemm_paths();

// The GEMM library, its version and the probe's revision ("oneDNN 2.7.3, probe 2"): a cached
// probe holds for one of each.
std::string gemm_library_version();

// The faster path of each class.
GemmChoice faster_paths(const GemmProbe& probe);

}  // namespace mlaserve::kernels
