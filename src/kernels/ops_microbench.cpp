// Microbenchmarks of the fast path against the ceilings of the machine they run on: the FMA
// peaks come from BM_FmaPeak in the same run (on the 2-vCPU AMD Zen 5 machine kind, 115-117
// GFLOP/s f32 and 232-235 GFLOP/s bf16 per core), the streaming read from the decode GEMV at
// m = 1 (~28 GB/s per core there, ~55 both). Run with OMP_NUM_THREADS=2 OMP_WAIT_POLICY=passive.
//
// Decode GEMV cycles through distinct weight copies totalling > 256 MB, so every pass streams
// W from DRAM as in a real decode step; the counter W_B/s is the weight stream rate.
// Timings are wall-clock (UseRealTime), since the work runs on OpenMP threads. The machine is
// shared, so each rate also comes per CPU-second (suffix _per_core): work / process CPU time,
// the rate one core delivers while the kernel actually holds it (a "CPU-normalised" figure
// divided by the thread count). Compare it with the per-core ceilings.
#include <benchmark/benchmark.h>

#include <ctime>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <memory>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "kernels/cpu_isa.h"
#include "kernels/dnnl_matmul.h"
#include "kernels/gemv.h"
#include "kernels/kernel_mode_test_util.h"
#include "kernels/ops.h"

namespace mlaserve::kernels {
namespace {

constexpr size_t kDramWorkingSet = size_t{384} << 20;  // well past the 32 MB L3

// Deterministic values in [-1, 1); speed does not depend on them, only on their count.
void fill(float* data, size_t count, uint32_t seed) {
  uint32_t state = seed * 2654435761u + 1u;
  for (size_t i = 0; i < count; ++i) {
    state = state * 1664525u + 1013904223u;
    data[i] = static_cast<float>(state >> 8) * (2.0f / 16777216.0f) - 1.0f;
  }
}

std::vector<float> values(size_t count, uint32_t seed) {
  std::vector<float> v(count);
  fill(v.data(), count, seed);
  return v;
}

// 64-byte aligned floats, as a KV cache pool should be allocated: with d_qk·4 bytes a multiple
// of 64, every row then starts on a cache line, and the attention kernels' 64-byte loads do not
// straddle two lines (a 16-byte offset costs them ~25 %).
using AlignedFloats = std::unique_ptr<float[], decltype(&std::free)>;

AlignedFloats aligned_values(size_t count, uint32_t seed) {
  const size_t bytes = (count * sizeof(float) + 63) / 64 * 64;
  AlignedFloats buffer(static_cast<float*>(std::aligned_alloc(64, bytes)), &std::free);
  fill(buffer.get(), count, seed);
  return buffer;
}

// FP8 in 128x128 blocks, INT8 one scale per row, INT4/MXFP4 one per 32 columns; codes cycle
// through every finite value.
void fill_quantized(Weight& w, uint32_t seed) {
  const auto count = static_cast<size_t>(w.rows() * w.code_row_bytes());
  uint32_t state = seed * 2654435761u + 1u;
  for (size_t i = 0; i < count; ++i) {
    state = state * 1664525u + 1013904223u;
    const auto code = static_cast<uint8_t>(state >> 24);
    w.codes()[i] = (code & 0x7f) == 0x7f ? code ^ 1 : code;
  }
  BlockScales& s = w.scales();
  const bool fp8 = w.type() == WeightType::FP8;
  s.col_block = fp8 ? 128 : four_bit(w.type()) ? 32 : w.cols();
  s.col_blocks = (w.cols() + s.col_block - 1) / s.col_block;
  for (int64_t r = 0; r < w.rows(); ++r)
    s.row_block[static_cast<size_t>(r)] = static_cast<int32_t>(fp8 ? r / 128 : r);
  s.resize(static_cast<size_t>((s.row_block.back() + 1) * s.col_blocks));
  for (size_t i = 0; i < s.blocks(); ++i) s.set(i, 1.0f / 256);
}

Weight make_weight(WeightType type, int64_t rows, int64_t cols, uint32_t seed) {
  Weight w(type, rows, cols);
  const auto count = static_cast<size_t>(rows * cols);
  if (w.quantized()) {
    fill_quantized(w, seed);
  } else if (type == WeightType::F32) {
    fill(w.f32(), count, seed);
  } else {
    const std::vector<float> v = values(count, seed);
    std::transform(v.begin(), v.end(), w.b16(), f32_to_bf16);
  }
  return w;
}

// Enough distinct copies of one weight shape to exceed kDramWorkingSet. Kept between calls
// of the same benchmark (Google Benchmark calls it several times); one set alive at a time.
const std::vector<Weight>& dram_weights(WeightType type, int64_t rows, int64_t cols) {
  static std::vector<Weight> copies;
  static std::tuple<WeightType, int64_t, int64_t> shape;
  if (copies.empty() || shape != std::tuple{type, rows, cols}) {
    copies.clear();
    const size_t bytes = Weight(type, 1, cols).bytes() * static_cast<size_t>(rows);
    const size_t count = kDramWorkingSet / bytes + 1;
    for (size_t i = 0; i < count; ++i) copies.push_back(make_weight(type, rows, cols, i + 1));
    shape = {type, rows, cols};
  }
  return copies;
}

double process_cpu_seconds() {
  timespec now{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &now);
  return static_cast<double>(now.tv_sec) + 1e-9 * static_cast<double>(now.tv_nsec);
}

// Starts the process CPU clock when made; rate() sets counter `name` (per wall second) and
// `name`_per_core (per CPU second) from the work done per iteration.
class Rates {
 public:
  explicit Rates(benchmark::State& state) : state_(state), cpu_start_(process_cpu_seconds()) {}

  void rate(const std::string& name, double per_iteration) {
    const double total = per_iteration * static_cast<double>(state_.iterations());
    state_.counters[name] = benchmark::Counter(total, benchmark::Counter::kIsRate);
    state_.counters[name + "_per_core"] = total / (process_cpu_seconds() - cpu_start_);
  }

 private:
  benchmark::State& state_;
  double cpu_start_;
};

// ---- matmul -----------------------------------------------------------------------------

// Args: N, K, m. Weights from DRAM; m <= 16 takes the GEMV path.
template <WeightType kType>
void BM_MatmulDecode(benchmark::State& state) {
  const int64_t n = state.range(0), k = state.range(1), m = state.range(2);
  const std::vector<Weight>& weights = dram_weights(kType, n, k);
  const std::vector<float> x = values(static_cast<size_t>(m * k), 7);
  std::vector<float> y(static_cast<size_t>(m * n));
  size_t next = 0;
  Rates rates(state);
  for (auto _ : state) {
    matmul(x.data(), m, weights[next], y.data());
    benchmark::DoNotOptimize(y.data());
    next = (next + 1) % weights.size();
  }
  rates.rate("W_B/s", static_cast<double>(weights[0].bytes()));
  rates.rate("FLOP/s", 2.0 * static_cast<double>(m * n * k));
}

// One decode step's experts: `jobs` weights of N x K (distinct, from DRAM) against one x row
// each, through one matmul_batch, as the MoE runs a token's routed and shared experts. Args: N,
// K, jobs.
template <WeightType kType>
void BM_ExpertBatch(benchmark::State& state) {
  const int64_t n = state.range(0), k = state.range(1), jobs = state.range(2);
  const std::vector<Weight>& weights = dram_weights(kType, n, k);
  const std::vector<float> x = values(static_cast<size_t>(k), 7);
  std::vector<float> y(static_cast<size_t>(jobs * n));
  std::vector<MatmulJob> batch(static_cast<size_t>(jobs));
  size_t next = 0;
  Rates rates(state);
  for (auto _ : state) {
    for (int64_t j = 0; j < jobs; ++j) {
      batch[static_cast<size_t>(j)] = {x.data(), 1, &weights[next], y.data() + j * n};
      next = (next + 1) % weights.size();
    }
    matmul_batch(batch);
    benchmark::DoNotOptimize(y.data());
  }
  rates.rate("W_B/s", static_cast<double>(jobs) * static_cast<double>(weights[0].bytes()));
}

// How BM_CutOver multiplies: the hand-written GEMV on the row-major weight or on its packed
// copy (bf16 only), or oneDNN on the packed copy (FP8: on panels dequantized per call).
enum class CutOverPath { Gemv, PackedGemv, OneDnn };

// The GEMV/oneDNN cut-over: the same DRAM-resident weights through each path, for growing m.
// Args: N, K, m.
template <WeightType kType, CutOverPath kPath>
void BM_CutOver(benchmark::State& state) {
  const int64_t n = state.range(0), k = state.range(1), m = state.range(2);
  static std::vector<Weight> weights;  // packed once per shape
  if (weights.empty() || weights[0].rows() != n || weights[0].cols() != k) {
    weights.clear();
    const size_t count = kDramWorkingSet / Weight(kType, n, k).bytes() + 1;
    for (size_t i = 0; i < count; ++i) {
      weights.push_back(make_weight(kType, n, k, static_cast<uint32_t>(i + 1)));
      if (kPath != CutOverPath::Gemv) prepare(weights.back());
    }
  }
  const std::vector<float> x = values(static_cast<size_t>(m * k), 7);
  std::vector<float> y(static_cast<size_t>(m * n));
  size_t next = 0;
  Rates rates(state);
  for (auto _ : state) {
    const Weight& w = weights[next];
    if (kPath == CutOverPath::OneDnn) {
      dnnl_matmul(x.data(), m, w, y.data());
    } else {
      const void* data = kType == WeightType::F32    ? static_cast<const void*>(w.f32())
                         : kType == WeightType::BF16 ? static_cast<const void*>(w.b16())
                                                     : static_cast<const void*>(w.codes());
      const bf16* packed = kPath == CutOverPath::PackedGemv ? dnnl_packed_bf16(w) : nullptr;
      const GemvJob job{x.data(), m, data, kType, n, k, y.data(), &w.scales(), packed};
      gemv_batch({&job, 1});
    }
    benchmark::DoNotOptimize(y.data());
    next = (next + 1) % weights.size();
  }
  rates.rate("W_B/s", static_cast<double>(weights[0].bytes()));
  rates.rate("FLOP/s", 2.0 * static_cast<double>(m * n * k));
}

// Prefill GEMM, compute-bound: one weight, m rows. Args: N, K, m. kPacked: oneDNN on its packed
// copy (prepare()) or on the row-major weight. kDeterministic: the deterministic kernels (GEMV
// at every m).
template <WeightType kType, bool kPacked = true, bool kDeterministic = false>
void BM_MatmulPrefill(benchmark::State& state) {
  const int64_t n = state.range(0), k = state.range(1), m = state.range(2);
  use_deterministic_kernels(kDeterministic);
  Weight w = make_weight(kType, n, k, 1);
  if (kPacked) prepare(w);
  const std::vector<float> x = values(static_cast<size_t>(m * k), 7);
  std::vector<float> y(static_cast<size_t>(m * n));
  Rates rates(state);
  for (auto _ : state) {
    matmul(x.data(), m, w, y.data());
    benchmark::DoNotOptimize(y.data());
  }
  rates.rate("FLOP/s", 2.0 * static_cast<double>(m * n * k));
  use_deterministic_kernels(false);
}

// The same on the kernels of a CPU without AVX512_BF16 (bf16 weights widened to f32 in the
// GEMV, FP8/INT8 ones through f32 panels).
template <WeightType kType>
void BM_MatmulDecodeWithoutBf16(benchmark::State& state) {
  const HiddenAvx512Bf16 hidden;
  BM_MatmulDecode<kType>(state);
}

// The same on the kernels of a CPU with AVX2 but no AVX-512 (the AVX2 GEMV).
template <WeightType kType>
void BM_MatmulDecodeWithoutAvx512(benchmark::State& state) {
  const HiddenAvx512 hidden;
  BM_MatmulDecode<kType>(state);
}

// The GEMM on panels widened to f32 (GemmPath::F32Widened) instead of bf16 dot products.
template <WeightType kType>
void BM_MatmulPrefillWidened(benchmark::State& state) {
  const ScopedGemmChoice f32({GemmPath::F32Widened, GemmPath::F32Widened});
  BM_MatmulPrefill<kType>(state);
}

// DeepSeek-V3 projections and the bench model's (hidden 1024, dense MLP 2816, vocab 32000).
void decode_shapes(benchmark::internal::Benchmark* b) {
  for (auto [n, k] :
       {std::pair{2048, 7168}, {7168, 2048}, {2 * 2816, 1024}, {1024, 2816}, {32000, 1024}}) {
    b->Args({n, k, 1});
  }
  b->ArgNames({"N", "K", "m"})->UseRealTime();
}

// A V3 projection, and the bench model's MoE expert gate_up (2·512 × 1024) and down (1024 × 512).
void cut_over_shapes(benchmark::internal::Benchmark* b) {
  for (auto [n, k] : {std::pair{2048, 7168}, {1024, 1024}, {1024, 512}, {5632, 1024}}) {
    for (int m : {1, 2, 3, 4, 6, 8, 16, 32}) b->Args({n, k, m});
  }
  b->ArgNames({"N", "K", "m"})->UseRealTime();
}

// A 512-token prompt's experts on the bench model (gate|up 2·512 × 1024, down 1024 × 512): ~96
// rows each, the packed GEMV's range (a quantized weight dequantized per 64-row block into it).
void expert_prefill_shapes(benchmark::internal::Benchmark* b) {
  for (auto [n, k] : {std::pair{1024, 1024}, {1024, 512}}) b->Args({n, k, 96});
  b->ArgNames({"N", "K", "m"})->UseRealTime();
}

// m = 32: a decode batch of 32 beyond the GEMV's range; m = 512: a prefill chunk.
void prefill_shapes(benchmark::internal::Benchmark* b) {
  for (auto [n, k] : {std::pair{2048, 7168}, {7168, 2048}, {2 * 2816, 1024}, {1024, 2816}}) {
    for (int m : {32, 512}) b->Args({n, k, m});
  }
  b->ArgNames({"N", "K", "m"})->UseRealTime()->Unit(benchmark::kMillisecond);
}

BENCHMARK(BM_MatmulDecode<WeightType::BF16>)->Apply(decode_shapes);
BENCHMARK(BM_MatmulDecode<WeightType::F32>)->Apply(decode_shapes);
BENCHMARK(BM_MatmulDecode<WeightType::FP8>)->Apply(decode_shapes);
BENCHMARK(BM_MatmulDecode<WeightType::INT8>)->Apply(decode_shapes);
BENCHMARK(BM_MatmulDecode<WeightType::INT4>)->Apply(decode_shapes);
BENCHMARK(BM_MatmulDecode<WeightType::MXFP4>)->Apply(decode_shapes);
BENCHMARK(BM_MatmulDecodeWithoutBf16<WeightType::BF16>)->Apply(decode_shapes);
BENCHMARK(BM_MatmulDecodeWithoutAvx512<WeightType::BF16>)->Apply(decode_shapes);
BENCHMARK(BM_MatmulDecodeWithoutAvx512<WeightType::FP8>)->Apply(decode_shapes);
BENCHMARK(BM_MatmulDecodeWithoutAvx512<WeightType::INT8>)->Apply(decode_shapes);
BENCHMARK(BM_MatmulDecodeWithoutAvx512<WeightType::INT4>)->Apply(decode_shapes);
BENCHMARK(BM_MatmulDecodeWithoutAvx512<WeightType::MXFP4>)->Apply(decode_shapes);
// The bench model's expert gate_up (2·512 × 1024) and down (1024 × 512), 8 per token (6
// routed + 2 shared), and DeepSeek-V3's (2·2048 × 7168, 7168 × 2048), 9 per token.
BENCHMARK(BM_ExpertBatch<WeightType::BF16>)
    ->ArgNames({"N", "K", "jobs"})
    ->Args({1024, 1024, 8})
    ->Args({1024, 512, 8})
    ->Args({4096, 7168, 9})
    ->Args({7168, 2048, 9})
    ->UseRealTime();
BENCHMARK(BM_CutOver<WeightType::BF16, CutOverPath::Gemv>)->Apply(cut_over_shapes);
BENCHMARK(BM_CutOver<WeightType::BF16, CutOverPath::PackedGemv>)->Apply(cut_over_shapes);
BENCHMARK(BM_CutOver<WeightType::BF16, CutOverPath::OneDnn>)->Apply(cut_over_shapes);
BENCHMARK(BM_CutOver<WeightType::F32, CutOverPath::Gemv>)->Apply(cut_over_shapes);
BENCHMARK(BM_CutOver<WeightType::F32, CutOverPath::OneDnn>)->Apply(cut_over_shapes);
BENCHMARK(BM_CutOver<WeightType::FP8, CutOverPath::Gemv>)->Apply(cut_over_shapes);
BENCHMARK(BM_CutOver<WeightType::FP8, CutOverPath::OneDnn>)->Apply(cut_over_shapes);
BENCHMARK(BM_MatmulPrefill<WeightType::BF16>)->Apply(prefill_shapes);
BENCHMARK(BM_MatmulPrefill<WeightType::BF16, false>)->Apply(prefill_shapes);
BENCHMARK(BM_MatmulPrefill<WeightType::BF16, true, true>)->Apply(prefill_shapes);
BENCHMARK(BM_MatmulPrefill<WeightType::F32>)->Apply(prefill_shapes);
BENCHMARK(BM_MatmulPrefillWidened<WeightType::BF16>)->Apply(prefill_shapes);
BENCHMARK(BM_MatmulPrefillWidened<WeightType::FP8>)->Apply(prefill_shapes);
BENCHMARK(BM_MatmulPrefillWidened<WeightType::INT4>)->Apply(prefill_shapes);
BENCHMARK(BM_MatmulPrefill<WeightType::FP8>)->Apply(prefill_shapes);
BENCHMARK(BM_MatmulPrefill<WeightType::INT8>)->Apply(prefill_shapes);
BENCHMARK(BM_MatmulPrefill<WeightType::INT4>)->Apply(prefill_shapes);
BENCHMARK(BM_MatmulPrefill<WeightType::BF16>)->Apply(expert_prefill_shapes);
BENCHMARK(BM_MatmulPrefill<WeightType::FP8>)->Apply(expert_prefill_shapes);
BENCHMARK(BM_MatmulPrefill<WeightType::INT8>)->Apply(expert_prefill_shapes);
BENCHMARK(BM_MatmulPrefill<WeightType::INT4>)->Apply(expert_prefill_shapes);

// ---- attention --------------------------------------------------------------------------

// A KV pool layer of `rows` random rows of d_qk values stored as kDtype, 64-byte aligned.
template <KvDtype kDtype>
struct StoredPool {
  std::unique_ptr<uint8_t[], decltype(&std::free)> values{nullptr, &std::free};
  std::vector<float> scales;

  StoredPool(int64_t rows, int64_t d_qk) : scales(static_cast<size_t>(rows)) {
    const int64_t row_bytes = d_qk * kv_value_bytes(kDtype);
    values.reset(static_cast<uint8_t*>(
        std::aligned_alloc(64, static_cast<size_t>((rows * row_bytes + 63) / 64 * 64))));
    const AlignedFloats row = aligned_values(static_cast<size_t>(d_qk), 1);
    for (int64_t r = 0; r < rows; ++r) {  // one row's values everywhere: speed does not care
      encode_kv_row(kDtype, row.get(), d_qk, values.get() + r * row_bytes,
                    &scales[static_cast<size_t>(r)]);
    }
  }
};

// One decode token against n_kv cached rows stored as kDtype. The pool holds enough sequences'
// caches to exceed kDramWorkingSet and each iteration reads the next one, so kv rows come from
// DRAM. Args: n_heads, d_latent, d_rope, n_kv. kBf16Activations: a bf16 model's call (q
// rounded, scores by vdpbf16ps over a bf16 cache where that is the GEMM path).
template <KvDtype kDtype, bool kBf16Activations = false>
void BM_AbsorbedDecode(benchmark::State& state) {
  const int64_t heads = state.range(0), d_latent = state.range(1), d_rope = state.range(2);
  const int64_t n_kv = state.range(3), d_qk = d_latent + d_rope;
  const int64_t row_bytes = kv_row_bytes(kDtype, d_qk);
  const int64_t sequences = static_cast<int64_t>(kDramWorkingSet) / (n_kv * row_bytes) + 1;
  const StoredPool<kDtype> pool(sequences * n_kv, d_qk);
  const KvRows kv{kDtype, d_qk, pool.values.get(), pool.scales.data()};
  std::vector<int32_t> slots(static_cast<size_t>(sequences * n_kv));
  std::iota(slots.begin(), slots.end(), 0);
  const AlignedFloats q = aligned_values(static_cast<size_t>(heads * d_qk), 2);
  std::vector<float> out(static_cast<size_t>(heads * d_latent));
  const AbsorbedAttention shape{1,
                                heads,
                                d_latent,
                                d_rope,
                                n_kv,
                                1.0f / std::sqrt(static_cast<float>(d_qk)),
                                kBf16Activations};
  int64_t sequence = 0;
  Rates rates(state);
  for (auto _ : state) {
    mla_attention_absorbed(shape, q.get(), kv, slots.data() + sequence * n_kv, out.data());
    benchmark::DoNotOptimize(out.data());
    sequence = (sequence + 1) % sequences;
  }
  rates.rate("KV_B/s", static_cast<double>(n_kv * row_bytes));
  rates.rate("FLOP/s", 2.0 * static_cast<double>(heads * n_kv * (d_qk + d_latent)));
}
void absorbed_decode_shapes(benchmark::internal::Benchmark* b) {
  b->ArgNames({"heads", "d_latent", "d_rope", "n_kv"})
      ->Args({16, 256, 32, 1024})
      ->Args({16, 256, 32, 4096})
      ->Args({16, 256, 32, 16384})
      ->Args({128, 512, 64, 4096})
      ->UseRealTime();
}
BENCHMARK(BM_AbsorbedDecode<KvDtype::Float32>)->Apply(absorbed_decode_shapes);
BENCHMARK(BM_AbsorbedDecode<KvDtype::BFloat16>)->Apply(absorbed_decode_shapes);
BENCHMARK(BM_AbsorbedDecode<KvDtype::BFloat16, true>)->Apply(absorbed_decode_shapes);
BENCHMARK(BM_AbsorbedDecode<KvDtype::Fp8E4m3>)->Apply(absorbed_decode_shapes);

// Causal prefill over n_tokens new tokens. Args: n_tokens, n_heads, d_qk, d_v.
void BM_PrefillAttention(benchmark::State& state) {
  const int64_t tokens = state.range(0), heads = state.range(1);
  const int64_t d_qk = state.range(2), d_v = state.range(3);
  const AlignedFloats q = aligned_values(static_cast<size_t>(tokens * heads * d_qk), 1);
  const AlignedFloats k = aligned_values(static_cast<size_t>(tokens * heads * d_qk), 2);
  const AlignedFloats v = aligned_values(static_cast<size_t>(tokens * heads * d_v), 3);
  std::vector<float> out(static_cast<size_t>(tokens * heads * d_v));
  const PrefillAttention shape{tokens, heads, d_qk, d_v,
                               1.0f / std::sqrt(static_cast<float>(d_qk))};
  Rates rates(state);
  for (auto _ : state) {
    mla_attention_prefill(shape, q.get(), k.get(), v.get(), out.data());
    benchmark::DoNotOptimize(out.data());
  }
  const double pairs = static_cast<double>(heads * tokens * (tokens + 1) / 2);  // causal
  rates.rate("FLOP/s", 2.0 * pairs * static_cast<double>(d_qk + d_v));
}
BENCHMARK(BM_PrefillAttention)
    ->ArgNames({"tokens", "heads", "d_qk", "d_v"})
    ->Args({512, 16, 96, 64})
    ->Args({4096, 16, 96, 64})
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond);

// DeepSeek Sparse Attention, bench-model shapes (bench-500m-v32: 16 heads, qk 96, v 64; the
// indexer 16 x 64, index_topk 2048): the indexer's top-k of a prefill (every token over its
// causal prefix) and of one decode query, both from a bf16 key pool, and the sparse prefill
// attention over 2048 selected tokens per query (k, v head-major as the model holds them).
void BM_IndexerTopk(benchmark::State& state) {
  const int64_t n_q = state.range(0), n_kv = state.range(1), heads = 16, dim = 64, top_k = 2048;
  const bool bf16_activations = state.range(2) != 0;  // bf16 scores where the CPU has them
  const AlignedFloats q = aligned_values(static_cast<size_t>(n_q * heads * dim), 1);
  const AlignedFloats w = aligned_values(static_cast<size_t>(n_q * heads), 2);
  const AlignedFloats key_values = aligned_values(static_cast<size_t>(n_kv * dim), 3);
  std::vector<bf16> stored(static_cast<size_t>(n_kv * dim));
  for (size_t i = 0; i < stored.size(); ++i) stored[i] = f32_to_bf16(key_values.get()[i]);
  const KvRows keys{KvDtype::BFloat16, dim, stored.data(), nullptr};
  std::vector<int32_t> slots(static_cast<size_t>(n_kv));
  std::iota(slots.begin(), slots.end(), 0);
  std::vector<int32_t> selected(static_cast<size_t>(n_q * top_k)), counts(static_cast<size_t>(n_q));
  Rates rates(state);
  for (auto _ : state) {
    indexer_topk({n_q, heads, dim, n_kv, top_k, bf16_activations}, q.get(), w.get(), keys,
                 slots.data(), selected.data(), counts.data());
    benchmark::DoNotOptimize(selected.data());
  }
  const double pairs = static_cast<double>(n_q) * static_cast<double>(2 * n_kv - n_q + 1) / 2;
  rates.rate("FLOP/s", 2.0 * pairs * static_cast<double>(heads * dim));
}
BENCHMARK(BM_IndexerTopk)
    ->ArgNames({"queries", "keys", "bf16"})
    ->Args({1, 32768, 0})
    ->Args({512, 8192, 0})
    ->Args({512, 32768, 0})
    ->Args({512, 32768, 1})
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond);

void BM_SparsePrefillAttention(benchmark::State& state) {
  const int64_t tokens = state.range(0), heads = 16, d_qk = 96, d_v = 64, top_k = 2048;
  const AlignedFloats q = aligned_values(static_cast<size_t>(tokens * heads * d_qk), 1);
  const AlignedFloats k = aligned_values(static_cast<size_t>(tokens * heads * d_qk), 2);
  const AlignedFloats v = aligned_values(static_cast<size_t>(tokens * heads * d_v), 3);
  std::vector<float> out(static_cast<size_t>(tokens * heads * d_v));
  std::vector<int32_t> selected(static_cast<size_t>(tokens * top_k)),
      counts(static_cast<size_t>(tokens));
  double pairs = 0;
  // A random top_k of each token's earlier tokens (all of them for the first top_k), sorted, as
  // a random indexer picks them: no two queries' rows in the same order.
  std::mt19937 rng(7);
  std::vector<int32_t> earlier;
  for (int64_t i = 0; i < tokens; ++i) {
    earlier.resize(static_cast<size_t>(i + 1));
    std::iota(earlier.begin(), earlier.end(), 0);
    const int64_t n = std::min(top_k, i + 1);
    for (int64_t j = 0; j < n; ++j) {
      std::swap(earlier[static_cast<size_t>(j)],
                earlier[static_cast<size_t>(j + static_cast<int64_t>(rng() % (i + 1 - j)))]);
    }
    std::sort(earlier.begin(), earlier.begin() + n);
    std::copy_n(earlier.begin(), n, selected.begin() + i * top_k);
    counts[static_cast<size_t>(i)] = static_cast<int32_t>(n);
    pairs += static_cast<double>(n);
  }
  const PrefillAttention shape{tokens, heads, d_qk, d_v,
                               1.0f / std::sqrt(static_cast<float>(d_qk))};
  Rates rates(state);
  for (auto _ : state) {
    mla_attention_prefill_sparse(shape, top_k, q.get(), k.get(), v.get(), selected.data(),
                                 counts.data(), out.data());
    benchmark::DoNotOptimize(out.data());
  }
  rates.rate("FLOP/s", 2.0 * pairs * static_cast<double>(heads * (d_qk + d_v)));
}
BENCHMARK(BM_SparsePrefillAttention)
    ->ArgNames({"tokens"})
    ->Args({8192})
    ->Args({32768})
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond);

// ---- ceilings ---------------------------------------------------------------------------

// The FMA peak of one core: 12 independent accumulators (more than the multiply-adds in flight
// at once on any core we met) updated from registers only, in assembly so that no compiler
// folds or reorders them. Each instruction is 16 lanes × 2 FLOPs (f32 FMA) or 16 lanes × 2
// products × 2 FLOPs (vdpbf16ps). Compare the kernels' FLOP/s_per_core with these.
#define MLASERVE_TWELVE(op)                                                                       \
  op " %%zmm13,%%zmm13,%%zmm1\n" op " %%zmm13,%%zmm13,%%zmm2\n" op " %%zmm13,%%zmm13,%%zmm3\n" op \
     " %%zmm13,%%zmm13,%%zmm4\n" op " %%zmm13,%%zmm13,%%zmm5\n" op " %%zmm13,%%zmm13,%%zmm6\n" op \
     " %%zmm13,%%zmm13,%%zmm7\n" op " %%zmm13,%%zmm13,%%zmm8\n" op " %%zmm13,%%zmm13,%%zmm9\n" op \
     " %%zmm13,%%zmm13,%%zmm10\n" op " %%zmm13,%%zmm13,%%zmm11\n" op " %%zmm13,%%zmm13,%%zmm12\n"

MLASERVE_AVX512 void f32_fma_loop(int64_t n) {
  asm volatile(
      "vpxord %%zmm13,%%zmm13,%%zmm13\n1:\n" MLASERVE_TWELVE("vfmadd231ps") "dec %0\n jnz 1b\n"
      : "+r"(n)::"xmm1", "xmm2", "xmm3", "xmm4", "xmm5", "xmm6", "xmm7", "xmm8", "xmm9", "xmm10",
        "xmm11", "xmm12", "xmm13", "cc");
}

MLASERVE_AVX512_BF16 void bf16_dot_loop(int64_t n) {
  asm volatile(
      "vpxord %%zmm13,%%zmm13,%%zmm13\n1:\n" MLASERVE_TWELVE("vdpbf16ps") "dec %0\n jnz 1b\n"
      : "+r"(n)::"xmm1", "xmm2", "xmm3", "xmm4", "xmm5", "xmm6", "xmm7", "xmm8", "xmm9", "xmm10",
        "xmm11", "xmm12", "xmm13", "cc");
}

template <bool kBf16>
void BM_FmaPeak(benchmark::State& state) {
  if (kBf16 ? !cpu_has_avx512_bf16() : !cpu_has_avx512()) {
    state.SkipWithError("the CPU lacks the instruction");
    return;
  }
  constexpr int64_t kLoops = 1 << 20;
  Rates rates(state);
  for (auto _ : state) kBf16 ? bf16_dot_loop(kLoops) : f32_fma_loop(kLoops);
  rates.rate("FLOP/s", static_cast<double>(kLoops) * 12 * (kBf16 ? 64 : 32));
}
BENCHMARK(BM_FmaPeak<false>)->Name("BM_FmaPeak/f32");
BENCHMARK(BM_FmaPeak<true>)->Name("BM_FmaPeak/bf16");

// ---- row-wise ops -----------------------------------------------------------------------

void BM_RmsNorm(benchmark::State& state) {
  const int64_t rows = state.range(0), dim = state.range(1);
  const std::vector<float> gamma = values(static_cast<size_t>(dim), 1);
  std::vector<float> x = values(static_cast<size_t>(rows * dim), 2);
  Rates rates(state);
  for (auto _ : state) {
    rms_norm(x.data(), gamma.data(), rows, dim, 1e-6f, x.data());
    benchmark::DoNotOptimize(x.data());
  }
  rates.rate("B/s", 8.0 * static_cast<double>(rows * dim));  // read + write
}
BENCHMARK(BM_RmsNorm)->ArgNames({"rows", "dim"})->Args({1, 1024})->Args({512, 1024})->UseRealTime();

void BM_SiluMul(benchmark::State& state) {
  const int64_t rows = state.range(0), inter = state.range(1);
  const std::vector<float> gate_up = values(static_cast<size_t>(rows * 2 * inter), 1);
  std::vector<float> out(static_cast<size_t>(rows * inter));
  Rates rates(state);
  for (auto _ : state) {
    silu_mul(gate_up.data(), rows, inter, out.data());
    benchmark::DoNotOptimize(out.data());
  }
  rates.rate("B/s", 12.0 * static_cast<double>(rows * inter));
}
BENCHMARK(BM_SiluMul)
    ->ArgNames({"rows", "inter"})
    ->Args({1, 2816})
    ->Args({512, 2816})
    ->UseRealTime();

void BM_Softmax(benchmark::State& state) {
  const int64_t n = state.range(0);
  const std::vector<float> logits = values(static_cast<size_t>(n), 1);
  std::vector<float> x(logits.size());
  Rates rates(state);
  for (auto _ : state) {
    x = logits;
    softmax(x.data(), n);
    benchmark::DoNotOptimize(x.data());
  }
  rates.rate("elements/s", static_cast<double>(n));
}
BENCHMARK(BM_Softmax)->ArgNames({"n"})->Arg(32000)->UseRealTime();

void BM_Rope(benchmark::State& state) {
  const int64_t vectors = state.range(0), dim = state.range(1);
  std::vector<float> x = values(static_cast<size_t>(vectors * dim), 1);
  const std::vector<float> cos_theta = values(static_cast<size_t>(dim / 2), 2);
  const std::vector<float> sin_theta = values(static_cast<size_t>(dim / 2), 3);
  Rates rates(state);
  for (auto _ : state) {
    rope_interleaved(x.data(), vectors, dim, dim, cos_theta.data(), sin_theta.data());
    benchmark::DoNotOptimize(x.data());
  }
  rates.rate("vectors/s", static_cast<double>(vectors));
}
BENCHMARK(BM_Rope)->ArgNames({"vectors", "dim"})->Args({16, 32})->Args({128, 64})->UseRealTime();

}  // namespace
}  // namespace mlaserve::kernels
