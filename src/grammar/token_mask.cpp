#include "grammar/token_mask.h"

#include <algorithm>
#include <vector>

namespace mlaserve::grammar {
namespace {

void allow(std::span<uint64_t> mask, std::span<const int32_t> ids) {
  for (const int32_t id : ids) {
    const auto bit = static_cast<uint32_t>(id);
    mask[bit / 64] |= uint64_t{1} << (bit % 64);
  }
}

}  // namespace

void compute_token_mask(Recognizer& recognizer, StateId state, const VocabularyTrie& trie,
                        std::span<uint64_t> mask) {
  std::fill(mask.begin(), mask.end(), 0);
  std::vector<StateId> state_at_depth(static_cast<size_t>(trie.max_depth) + 1);
  state_at_depth[0] = state;
  for (int32_t node = 0; node < trie.node_count();) {
    const TrieNode& n = trie.nodes[static_cast<size_t>(node)];
    const StateId parent = state_at_depth[n.depth - 1];
    const StateId next = recognizer.next(parent, n.byte);
    if (next == kDead) {
      node = n.subtree_end;
      continue;
    }
    // A byte that loops hints that the bytes below may all loop too (inside a string): then
    // every token of the subtree is allowed.
    if (next == parent && n.bytes_below >= 0 &&
        recognizer.self_loops(next).includes(
            trie.bytes_below[static_cast<size_t>(n.bytes_below)])) {
      allow(mask, trie.subtree_tokens(n));
      node = n.subtree_end;
      continue;
    }
    state_at_depth[n.depth] = next;
    allow(mask, trie.node_tokens(node));
    ++node;
  }
}

}  // namespace mlaserve::grammar
