#include "grammar/token_mask.h"

#include <algorithm>
#include <vector>

namespace mlaserve::grammar {

void compute_token_mask(Recognizer& recognizer, StateId state, const VocabularyTrie& trie,
                        std::span<uint64_t> mask) {
  std::fill(mask.begin(), mask.end(), 0);
  std::vector<StateId> state_at_depth(static_cast<size_t>(trie.max_depth) + 1);
  state_at_depth[0] = state;
  for (int32_t node = 0; node < trie.node_count();) {
    const size_t depth = trie.depth[static_cast<size_t>(node)];
    const StateId next =
        recognizer.next(state_at_depth[depth - 1], trie.byte[static_cast<size_t>(node)]);
    if (next == kDead) {
      node = trie.subtree_end[static_cast<size_t>(node)];
      continue;
    }
    state_at_depth[depth] = next;
    for (int32_t t = trie.token_begin[static_cast<size_t>(node)];
         t < trie.token_begin[static_cast<size_t>(node) + 1]; ++t) {
      const auto id = static_cast<size_t>(trie.token_ids[static_cast<size_t>(t)]);
      mask[id / 64] |= uint64_t{1} << (id % 64);
    }
    ++node;
  }
}

}  // namespace mlaserve::grammar
