// The benchmark's requests (SGLang bench_serving's "random" and "generated-shared-prefix"
// datasets, built from the tokenizer's vocabulary instead of ShareGPT text) and their
// arrival times.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "bench_serving/prompt_maker.h"
#include "bench_serving/rng.h"

namespace mlaserve::bench_serving {

struct BenchRequest {
  std::string prompt;
  int64_t prompt_len = 0;  // tokens, without the BOS the server adds
  int64_t output_len = 0;  // max_new_tokens
};

// SGLang's rule: `count` lengths drawn uniformly from [max(1, floor(full_len * range_ratio)),
// full_len].
std::vector<int64_t> random_lengths(int64_t full_len, double range_ratio, size_t count, Rng& rng);

struct DatasetOptions {
  std::string name = "random";  // or "shared-prefix"
  int64_t num_prompts = 1000;
  int64_t input_len = 1024;  // random: the prompt; shared-prefix: the question after the prefix
  int64_t output_len = 1024;
  double range_ratio = 0.0;
  int64_t shared_prefix_len = 512;  // shared-prefix: the tokens of each group's common prefix
  int64_t num_groups = 4;           // shared-prefix: how many different prefixes
};

// random: each prompt is random text of exactly its drawn length.
// shared-prefix: request i belongs to group i % num_groups; its prompt is the group's prefix
// (exactly shared_prefix_len tokens), "\n\n", and its own question (exactly its drawn input
// length), as SGLang's generated-shared-prefix joins them; prompt_len counts the whole text,
// whose tokens can differ by one or two from the sum where the pieces meet. The requests are
// then shuffled, so that groups interleave.
std::vector<BenchRequest> make_dataset(const DatasetOptions& options, const PromptMaker& maker,
                                       Rng& rng);

// When each request is sent, in seconds from the start: all at 0 for an infinite rate, else a
// Poisson process (exponential gaps with mean 1/rate), the first request at 0.
std::vector<double> arrival_times(size_t count, double rate, Rng& rng);

}  // namespace mlaserve::bench_serving
