// Cost of choosing one token from a DeepSeek-sized vocabulary, per sampling mode.
#include <benchmark/benchmark.h>

#include <random>

#include "sampling/sampling.h"

namespace mlaserve::sampling {
namespace {

constexpr size_t kVocab = 129280;

std::vector<float> random_logits() {
  std::mt19937 rng(1);
  std::normal_distribution<float> normal(0.0f, 2.0f);
  std::vector<float> logits(kVocab);
  for (float& x : logits) x = normal(rng);
  return logits;
}

void run_sampler(benchmark::State& state, const SamplingParams& params) {
  const std::vector<float> logits = random_logits();
  Sampler sampler(params);
  std::vector<float> row;
  for (auto _ : state) {
    row = logits;
    benchmark::DoNotOptimize(sampler.sample(row));
  }
}

void BM_Greedy(benchmark::State& state) {
  run_sampler(state, {.temperature = 0.0f});
}
void BM_Temperature(benchmark::State& state) {
  run_sampler(state, {});
}
void BM_TopK50(benchmark::State& state) {
  run_sampler(state, {.top_k = 50});
}
void BM_TopP09(benchmark::State& state) {
  run_sampler(state, {.top_p = 0.9f});
}
void BM_MinP005(benchmark::State& state) {
  run_sampler(state, {.min_p = 0.05f});
}

void BM_Logprobs20(benchmark::State& state) {
  const std::vector<float> logits = random_logits();
  for (auto _ : state) benchmark::DoNotOptimize(logprobs(logits, 0, 20));
}

BENCHMARK(BM_Greedy);
BENCHMARK(BM_Temperature);
BENCHMARK(BM_TopK50);
BENCHMARK(BM_TopP09);
BENCHMARK(BM_MinP005);
BENCHMARK(BM_Logprobs20);

}  // namespace
}  // namespace mlaserve::sampling
