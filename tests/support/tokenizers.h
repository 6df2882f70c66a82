// The tokenizers the tests share, each loaded once per test binary.
#pragma once

#include "tokenizer/tokenizer.h"

namespace mlaserve::testing {

// brown-tiny's tokenizer files (the same as models/brown-tiny's) and DeepSeek-V3's.
inline constexpr const char* kBrownTinyTokenizerDir = "tests/data/brown-tiny-tokenizer";
inline constexpr const char* kDeepSeekV3TokenizerDir = "tests/data/tokenizer/deepseek-v3";
// A small tiktoken.model with Kimi-K2's special tokens (tests/data/kimi-tokenizer/README.md).
inline constexpr const char* kKimiTokenizerDir = "tests/data/kimi-tokenizer";

const tokenizer::Tokenizer& brown_tiny_tokenizer();
const tokenizer::Tokenizer& deepseek_v3_tokenizer();
const tokenizer::Tokenizer& kimi_tokenizer();

}  // namespace mlaserve::testing
