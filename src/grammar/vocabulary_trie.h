// A vocabulary's text tokens as a byte trie laid out for walking with a recognizer: nodes in
// depth-first preorder, so a node's subtree is the run of nodes after it and a rejected prefix
// skips its whole subtree with one jump.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace mlaserve::grammar {

struct TrieNode {
  uint8_t byte;         // on the edge into the node
  uint16_t depth;       // 1 for the root's children
  int32_t subtree_end;  // one past the last node of the node's subtree
  int32_t token_begin;  // its tokens (those whose bytes end here) are token_ids[token_begin ..
                        // the next node's token_begin)
};

struct VocabularyTrie {
  // Nodes in depth-first preorder (the root is not stored), then a sentinel whose token_begin
  // ends the last node's tokens.
  std::vector<TrieNode> nodes;
  std::vector<int32_t> token_ids;
  int32_t max_depth = 0;

  int32_t node_count() const { return static_cast<int32_t>(nodes.size()) - 1; }
};

// The trie of every non-empty token.
VocabularyTrie build_vocabulary_trie(const std::vector<std::string>& token_bytes);

}  // namespace mlaserve::grammar
