#include <atomic>

#include "grammar/grammar.h"
#include "grammar/vocabulary_trie.h"

namespace mlaserve::grammar {
namespace {

std::vector<std::string> text_tokens(std::vector<std::string> token_bytes,
                                     const std::vector<bool>& excluded) {
  if (excluded.size() != token_bytes.size())
    fail("TokenVocabulary: {} exclusion flags for {} tokens", excluded.size(), token_bytes.size());
  for (size_t id = 0; id < token_bytes.size(); ++id) {
    if (excluded[id]) token_bytes[id].clear();
  }
  return token_bytes;
}

uint64_t next_serial() {
  static std::atomic<uint64_t> serial{0};
  return ++serial;
}

}  // namespace

TokenVocabulary::TokenVocabulary(std::vector<std::string> token_bytes,
                                 const std::vector<bool>& excluded)
    : token_bytes_(text_tokens(std::move(token_bytes), excluded)),
      trie_(std::make_unique<const VocabularyTrie>(build_vocabulary_trie(token_bytes_))),
      serial_(next_serial()) {}

TokenVocabulary::~TokenVocabulary() = default;

std::string_view TokenVocabulary::text_bytes(int32_t id) const {
  if (id < 0 || id >= size()) fail("token id {} is outside the vocabulary (0..{})", id, size() - 1);
  return token_bytes_[static_cast<size_t>(id)];
}

}  // namespace mlaserve::grammar
