// A fixed set of sequences run together: one prefill step over every prompt, then decode steps
// of one token per sequence. Used by `eval` and `bench-one-batch` (the server has a scheduler).
#pragma once

#include <vector>

#include "model/deepseek.h"

namespace mlaserve::model {

class StaticBatch {
 public:
  // Reserves KV slots for every prompt plus max_new_tokens generated tokens.
  StaticBatch(DeepseekModel& model, cache::LatentKvPool& kv, StepComm& comm,
              std::vector<std::vector<int32_t>> prompts, int64_t max_new_tokens);
  ~StaticBatch();
  StaticBatch(const StaticBatch&) = delete;
  StaticBatch& operator=(const StaticBatch&) = delete;

  // Runs every prompt. Returns logits [rows, vocab]: each prompt's last position, or every
  // position of every prompt (prompts concatenated) when all_positions.
  std::vector<float> prefill(bool all_positions);

  // Feeds next_tokens[i] to sequence i; returns the logits [n_sequences, vocab].
  std::vector<float> decode(const std::vector<int32_t>& next_tokens);

  size_t size() const { return seqs_.size(); }

 private:
  struct Sequence {
    std::vector<int32_t> tokens;  // prompt then generated tokens
    std::vector<int32_t> slots;   // KV slots reserved for every token it may hold
    int64_t n_cached = 0;         // tokens already in the KV cache
  };
  std::vector<float> run(StepInput& input);

  DeepseekModel& model_;
  cache::LatentKvPool& kv_;
  StepComm& comm_;
  std::vector<Sequence> seqs_;
};

}  // namespace mlaserve::model
