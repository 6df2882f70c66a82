// The token ids that random prompts are drawn from.
#pragma once

#include <cstdint>
#include <filesystem>
#include <vector>

#include "tokenizer/tokenizer.h"

namespace mlaserve::bench_serving {

// The ids of `dir`/tokenizer.json's BPE vocabulary (model.vocab) that are not added tokens
// (added_tokens: BOS/EOS, chat markers, tool-call markers, which a prompt of random text should
// not contain) and that decode to whole UTF-8 characters (a lone byte of a multi-byte
// character would decode to U+FFFD). Sorted. tokenizer.json is read with a SAX pass that keeps
// only these ids, as the Tokenizer does not expose which ids are added tokens.
std::vector<int32_t> prompt_token_ids(const std::filesystem::path& dir,
                                      const tokenizer::Tokenizer& tokenizer);

}  // namespace mlaserve::bench_serving
