// The token mask of a recognizer state: a depth-first walk of the vocabulary trie that feeds
// each node's byte to the recognizer and skips the whole subtree of a rejected prefix.
#pragma once

#include <cstdint>
#include <span>

#include "grammar/recognizer.h"
#include "grammar/vocabulary_trie.h"

namespace mlaserve::grammar {

// Sets the bit of every token whose bytes the recognizer accepts from `state` and clears the
// others (mask has (token count + 63) / 64 words).
void compute_token_mask(Recognizer& recognizer, StateId state, const VocabularyTrie& trie,
                        std::span<uint64_t> mask);

}  // namespace mlaserve::grammar
