#include "model/static_batch.h"

#include "core/error.h"

namespace mlaserve::model {

StaticBatch::StaticBatch(DeepseekModel& model, cache::LatentKvPool& kv, StepComm& comm,
                         std::vector<std::vector<int32_t>> prompts, int64_t max_new_tokens)
    : model_(model), kv_(kv), comm_(comm) {
  const int64_t max_positions = model.config().max_position_embeddings;
  for (auto& prompt : prompts) {
    const int64_t need = static_cast<int64_t>(prompt.size()) + max_new_tokens;
    if (prompt.empty()) fail("a prompt is empty: every prompt needs at least one token");
    if (need > max_positions) {
      fail("prompt of {} tokens + {} new tokens exceeds the model's context of {} positions", prompt.size(),
           max_new_tokens, max_positions);
    }
    Sequence s;
    s.tokens = std::move(prompt);
    s.slots = kv_.allocate(need);
    seqs_.push_back(std::move(s));
  }
}

StaticBatch::~StaticBatch() {
  for (const Sequence& s : seqs_) kv_.release(s.slots);
}

std::vector<float> StaticBatch::prefill(bool all_positions) {
  StepInput in;
  for (Sequence& s : seqs_) {
    const int64_t n = static_cast<int64_t>(s.tokens.size());
    for (int64_t j = 0; j < n; ++j) {
      in.tokens.push_back(s.tokens[static_cast<size_t>(j)]);
      in.positions.push_back(static_cast<int32_t>(j));
      if (all_positions || j == n - 1) in.logit_rows.push_back(static_cast<int64_t>(in.tokens.size()) - 1);
    }
    in.seqs.push_back({n, 0, s.slots});
  }
  return run(in);
}

std::vector<float> StaticBatch::decode(const std::vector<int32_t>& next_tokens) {
  if (next_tokens.size() != seqs_.size()) fail("decode: {} tokens for {} sequences", next_tokens.size(), seqs_.size());
  StepInput in;
  for (size_t i = 0; i < seqs_.size(); ++i) {
    Sequence& s = seqs_[i];
    if (s.tokens.size() >= s.slots.size()) fail("decode: sequence {} has used all its reserved KV slots", i);
    s.tokens.push_back(next_tokens[i]);
    in.tokens.push_back(next_tokens[i]);
    in.positions.push_back(static_cast<int32_t>(s.n_cached));
    in.logit_rows.push_back(static_cast<int64_t>(i));
    in.seqs.push_back({1, s.n_cached, s.slots});
  }
  return run(in);
}

std::vector<float> StaticBatch::run(StepInput& in) {
  std::vector<float> logits = model_.forward(in, kv_, comm_);
  for (size_t i = 0; i < seqs_.size(); ++i) seqs_[i].n_cached += in.seqs[i].n_new;
  return logits;
}

}  // namespace mlaserve::model
