// Run-time CPU feature checks and the function attributes that enable AVX-512 code.
// The project builds for x86-64-v2; every AVX-512 function carries one of the attributes
// below and is only called after the matching check passed.
#pragma once

#define MLASERVE_AVX512 __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,fma")))
#define MLASERVE_AVX512_BF16 \
  __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx512bf16,fma")))

// The GEMV of CPUs with AVX2 but no AVX-512.
#define MLASERVE_AVX2 __attribute__((target("avx2,fma")))

// The FP8/INT8 GEMV's decode: byte permutes (vpermi2b, AVX512_VBMI) beside vdpbf16ps.
#define MLASERVE_AVX512_VBMI_BF16 \
  __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx512bf16,avx512vbmi,fma")))

// The AMX tile kernels (Sapphire Rapids and later): tile loads and bf16 tile products.
#define MLASERVE_AMX \
  __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx512bf16,amx-tile,amx-bf16,fma")))

namespace mlaserve::kernels {

// True after use_reference_kernels(true) (ops.h): every fast path then declines.
bool reference_kernels_forced();

// True after hide_avx512(true) (ops.h): the kernels then run as on a CPU without AVX-512.
bool avx512_hidden();

// True when the MLASERVE_AVX512 kernels may run.
inline bool cpu_has_avx512() {
  static const bool has = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                          __builtin_cpu_supports("avx512vl") &&
                          __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("fma");
  return has && !reference_kernels_forced() && !avx512_hidden();
}

// True when the MLASERVE_AVX2 kernels may run.
inline bool cpu_has_avx2() {
  static const bool has = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  return has && !reference_kernels_forced();
}

// True after hide_avx512_bf16(true) (ops.h): the kernels then run as on a CPU without it.
bool avx512_bf16_hidden();

// True when the MLASERVE_AVX512_BF16 kernels (vdpbf16ps) may run.
inline bool cpu_has_avx512_bf16() {
  static const bool has = __builtin_cpu_supports("avx512bf16");
  return has && cpu_has_avx512() && !avx512_bf16_hidden();
}

// True when the MLASERVE_AVX512_VBMI_BF16 kernels may run (every CPU with AVX512_BF16 but
// Cooper Lake has VBMI).
inline bool cpu_has_avx512_vbmi_bf16() {
  static const bool has = __builtin_cpu_supports("avx512vbmi");
  return has && cpu_has_avx512_bf16();
}

// True when the MLASERVE_AMX kernels may run: the CPU has AMX-BF16 tiles, Linux granted this
// process their state, and cpu_has_avx512_bf16() holds (hiding it hides the tiles too).
bool cpu_has_amx_bf16();

}  // namespace mlaserve::kernels
