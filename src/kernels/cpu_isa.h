// Run-time CPU feature checks and the function attributes that enable AVX-512 code.
// The project builds for x86-64-v2; every AVX-512 function carries one of the attributes
// below and is only called after the matching check passed.
#pragma once

#define MLASERVE_AVX512 __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,fma")))
#define MLASERVE_AVX512_BF16 \
  __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx512bf16,fma")))

namespace mlaserve::kernels {

// True after use_reference_kernels(true) (ops.h): every fast path then declines.
bool reference_kernels_forced();

// True when the MLASERVE_AVX512 kernels may run.
inline bool cpu_has_avx512() {
  static const bool has = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                          __builtin_cpu_supports("avx512vl") &&
                          __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("fma");
  return has && !reference_kernels_forced();
}

// True after hide_avx512_bf16(true) (ops.h): the kernels then run as on a CPU without it.
bool avx512_bf16_hidden();

// True when the MLASERVE_AVX512_BF16 kernels (vdpbf16ps) may run.
inline bool cpu_has_avx512_bf16() {
  static const bool has = __builtin_cpu_supports("avx512bf16");
  return has && cpu_has_avx512() && !avx512_bf16_hidden();
}

}  // namespace mlaserve::kernels
