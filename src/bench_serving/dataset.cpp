#include "bench_serving/dataset.h"

#include <algorithm>
#include <cmath>

#include "core/error.h"

namespace mlaserve::bench_serving {

std::vector<int64_t> random_lengths(int64_t full_len, double range_ratio, size_t count, Rng& rng) {
  const int64_t scaled =
      static_cast<int64_t>(std::floor(static_cast<double>(full_len) * range_ratio));
  const int64_t low = std::max<int64_t>(scaled, 1);
  if (full_len < low) fail("a length of {} is below the minimum of 1", full_len);
  std::vector<int64_t> lengths(count);
  for (int64_t& length : lengths) length = rng.uniform_int(low, full_len);
  return lengths;
}

namespace {

std::vector<BenchRequest> random_dataset(const DatasetOptions& options, const PromptMaker& maker,
                                         Rng& rng) {
  const size_t n = static_cast<size_t>(options.num_prompts);
  const std::vector<int64_t> input_lens =
      random_lengths(options.input_len, options.range_ratio, n, rng);
  const std::vector<int64_t> output_lens =
      random_lengths(options.output_len, options.range_ratio, n, rng);
  std::vector<BenchRequest> requests(n);
  for (size_t i = 0; i < n; ++i) {
    requests[i] = {maker.make(input_lens[i], rng), input_lens[i], output_lens[i]};
  }
  return requests;
}

void shuffle(std::vector<BenchRequest>& requests, Rng& rng) {
  for (size_t i = requests.size(); i > 1; --i) {
    const size_t j = static_cast<size_t>(rng.uniform_int(0, static_cast<int64_t>(i) - 1));
    std::swap(requests[i - 1], requests[j]);
  }
}

std::vector<BenchRequest> shared_prefix_dataset(const DatasetOptions& options,
                                                const PromptMaker& maker, Rng& rng) {
  if (options.num_groups < 1) fail("--num-groups must be at least 1");
  std::vector<std::string> prefixes;
  for (int64_t g = 0; g < options.num_groups; ++g) {
    prefixes.push_back(maker.make(options.shared_prefix_len, rng));
  }
  const size_t n = static_cast<size_t>(options.num_prompts);
  const std::vector<int64_t> question_lens =
      random_lengths(options.input_len, options.range_ratio, n, rng);
  const std::vector<int64_t> output_lens =
      random_lengths(options.output_len, options.range_ratio, n, rng);
  std::vector<BenchRequest> requests(n);
  for (size_t i = 0; i < n; ++i) {
    const std::string& prefix = prefixes[i % prefixes.size()];
    std::string prompt = prefix + "\n\n" + maker.make(question_lens[i], rng);
    const int64_t prompt_len = maker.count(prompt);
    requests[i] = {std::move(prompt), prompt_len, output_lens[i]};
  }
  shuffle(requests, rng);
  return requests;
}

}  // namespace

std::vector<BenchRequest> make_dataset(const DatasetOptions& options, const PromptMaker& maker,
                                       Rng& rng) {
  if (options.num_prompts < 1) fail("--num-prompts must be at least 1");
  if (options.range_ratio < 0.0 || options.range_ratio > 1.0) {
    fail("--random-range-ratio must be in [0, 1], got {}", options.range_ratio);
  }
  if (options.name == "random") return random_dataset(options, maker, rng);
  if (options.name == "shared-prefix") return shared_prefix_dataset(options, maker, rng);
  fail("unknown dataset '{}' (expected random or shared-prefix)", options.name);
}

std::vector<double> arrival_times(size_t count, double rate, Rng& rng) {
  std::vector<double> times(count, 0.0);
  if (std::isinf(rate)) return times;
  for (size_t i = 1; i < count; ++i) times[i] = times[i - 1] + rng.exponential(rate);
  return times;
}

}  // namespace mlaserve::bench_serving
