// A vocabulary's text tokens as a byte trie laid out for walking with a recognizer: nodes in
// depth-first preorder, so a node's subtree is the run of nodes after it and a rejected prefix
// skips its whole subtree with one jump.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace mlaserve::grammar {

struct VocabularyTrie {
  // Node k (the root is not stored): the byte on the edge into it, its depth (1 for the root's
  // children), one past the last node of its subtree, and its tokens, token_ids[token_begin[k] ..
  // token_begin[k + 1]) (those whose bytes end at it).
  std::vector<uint8_t> byte;
  std::vector<uint16_t> depth;
  std::vector<int32_t> subtree_end;
  std::vector<int32_t> token_begin;
  std::vector<int32_t> token_ids;
  int32_t max_depth = 0;

  int32_t node_count() const { return static_cast<int32_t>(byte.size()); }
};

// The trie of every non-empty token.
VocabularyTrie build_vocabulary_trie(const std::vector<std::string>& token_bytes);

}  // namespace mlaserve::grammar
