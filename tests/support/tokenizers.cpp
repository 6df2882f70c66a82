#include "support/tokenizers.h"

namespace mlaserve::testing {

const tokenizer::Tokenizer& brown_tiny_tokenizer() {
  static const tokenizer::Tokenizer tokenizer = tokenizer::Tokenizer::load(kBrownTinyTokenizerDir);
  return tokenizer;
}

const tokenizer::Tokenizer& deepseek_v3_tokenizer() {
  static const tokenizer::Tokenizer tokenizer = tokenizer::Tokenizer::load(kDeepSeekV3TokenizerDir);
  return tokenizer;
}

const tokenizer::Tokenizer& kimi_tokenizer() {
  static const tokenizer::Tokenizer tokenizer = tokenizer::Tokenizer::load(kKimiTokenizerDir);
  return tokenizer;
}

}  // namespace mlaserve::testing
