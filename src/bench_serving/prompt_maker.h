// Random-text prompts with an exact token count.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "bench_serving/rng.h"
#include "tokenizer/tokenizer.h"

namespace mlaserve::bench_serving {

// Counts tokens as the server will for the prompt text itself: encoded without special tokens.
// The BOS a server adds in front is not part of the count (as in SGLang's random dataset).
class PromptMaker {
 public:
  // `token_ids`: what prompts are drawn from (see prompt_token_ids).
  PromptMaker(const tokenizer::Tokenizer& tokenizer, std::vector<int32_t> token_ids);

  // Text that encodes to exactly `tokens` tokens. Decoding random ids and encoding the text
  // again rarely gives back the same number (neighbouring tokens merge, or one splits), so
  // this repeats: decode, encode; keep the first `tokens` ids of the encoding when it is too
  // long, or append random ids when it is too short; until the encoding has exactly `tokens`
  // ids. The ids kept are an encoding already, so it settles within a few rounds; it is an
  // Error if it has not after many.
  std::string make(int64_t tokens, Rng& rng) const;

  int64_t count(std::string_view text) const;

 private:
  void append_random(std::vector<int32_t>& ids, int64_t count, Rng& rng) const;
  const tokenizer::Tokenizer& tokenizer_;
  std::vector<int32_t> token_ids_;
};

}  // namespace mlaserve::bench_serving
