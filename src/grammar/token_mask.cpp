#include "grammar/token_mask.h"

#include <algorithm>
#include <vector>

namespace mlaserve::grammar {

void compute_token_mask(Recognizer& recognizer, StateId state, const VocabularyTrie& trie,
                        std::span<uint64_t> mask) {
  std::fill(mask.begin(), mask.end(), 0);
  std::vector<StateId> state_at_depth(static_cast<size_t>(trie.max_depth) + 1);
  state_at_depth[0] = state;
  const TrieNode* nodes = trie.nodes.data();
  const int32_t* token_ids = trie.token_ids.data();
  for (int32_t node = 0; node < trie.node_count();) {
    const TrieNode& n = nodes[node];
    const StateId next = recognizer.next(state_at_depth[n.depth - 1], n.byte);
    if (next == kDead) {
      node = n.subtree_end;
      continue;
    }
    state_at_depth[n.depth] = next;
    for (int32_t t = n.token_begin; t < nodes[node + 1].token_begin; ++t) {
      const auto id = static_cast<uint32_t>(token_ids[t]);
      mask[id / 64] |= uint64_t{1} << (id % 64);
    }
    ++node;
  }
}

}  // namespace mlaserve::grammar
