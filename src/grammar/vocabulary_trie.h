// A vocabulary's text tokens as a byte trie laid out for walking with a recognizer: nodes in
// depth-first preorder, so a node's subtree is the run of nodes after it and a rejected prefix
// skips its whole subtree with one jump. The bytes below each large subtree let a walk accept
// all of it at once when the recognizer loops on them (inside a string, most of the vocabulary).
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "grammar/byte_set.h"

namespace mlaserve::grammar {

struct TrieNode {
  uint8_t byte;         // on the edge into the node
  uint16_t depth;       // 1 for the root's children
  int32_t subtree_end;  // one past the last node of the node's subtree
  int32_t token_begin;  // its tokens (those whose bytes end here) are token_ids[token_begin ..
                        // the next node's token_begin)
  // The bytes of the nodes below it, VocabularyTrie::bytes_below[bytes_below]; -1 when its
  // subtree has fewer than kMinBulkTokens tokens (cheaper walked than checked).
  int32_t bytes_below;
};

inline constexpr int32_t kMinBulkTokens = 16;

struct VocabularyTrie {
  // Nodes in depth-first preorder (the root is not stored), then a sentinel whose token_begin
  // ends the last node's tokens.
  std::vector<TrieNode> nodes;
  std::vector<int32_t> token_ids;
  std::vector<ByteSet> bytes_below;  // distinct sets
  int32_t max_depth = 0;

  int32_t node_count() const { return static_cast<int32_t>(nodes.size()) - 1; }
  // The tokens whose bytes end at node k.
  std::span<const int32_t> node_tokens(int32_t k) const {
    const auto begin = static_cast<size_t>(nodes[static_cast<size_t>(k)].token_begin);
    return std::span(token_ids).subspan(
        begin, static_cast<size_t>(nodes[static_cast<size_t>(k) + 1].token_begin) - begin);
  }
  // The tokens of a node's subtree: contiguous, since they are stored in preorder.
  std::span<const int32_t> subtree_tokens(const TrieNode& node) const {
    const auto begin = static_cast<size_t>(node.token_begin);
    return std::span(token_ids).subspan(
        begin,
        static_cast<size_t>(nodes[static_cast<size_t>(node.subtree_end)].token_begin) - begin);
  }
};

// The trie of every non-empty token.
VocabularyTrie build_vocabulary_trie(const std::vector<std::string>& token_bytes);

}  // namespace mlaserve::grammar
