#include "bench_serving/prompt_maker.h"

#include "core/error.h"

namespace mlaserve::bench_serving {

PromptMaker::PromptMaker(const tokenizer::Tokenizer& tokenizer, std::vector<int32_t> token_ids)
    : tokenizer_(tokenizer), token_ids_(std::move(token_ids)) {
  if (token_ids_.empty()) fail("no token ids to build prompts from");
}

std::string PromptMaker::make(int64_t tokens, Rng& rng) const {
  constexpr int kMaxRounds = 1000;
  std::vector<int32_t> ids;
  append_random(ids, tokens, rng);
  for (int round = 0; round < kMaxRounds; ++round) {
    std::string text = tokenizer_.decode(ids, false);
    ids = tokenizer_.encode(text, false);
    const int64_t have = static_cast<int64_t>(ids.size());
    if (have == tokens) return text;
    if (have > tokens) {
      ids.resize(static_cast<size_t>(tokens));
    } else {
      append_random(ids, tokens - have, rng);
    }
  }
  fail("could not make a prompt of exactly {} tokens in {} rounds", tokens, kMaxRounds);
}

int64_t PromptMaker::count(std::string_view text) const {
  return static_cast<int64_t>(tokenizer_.encode(text, false).size());
}

void PromptMaker::append_random(std::vector<int32_t>& ids, int64_t count, Rng& rng) const {
  const int64_t last = static_cast<int64_t>(token_ids_.size()) - 1;
  for (int64_t i = 0; i < count; ++i) {
    ids.push_back(token_ids_[static_cast<size_t>(rng.uniform_int(0, last))]);
  }
}

}  // namespace mlaserve::bench_serving
