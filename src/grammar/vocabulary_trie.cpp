#include "grammar/vocabulary_trie.h"

#include <algorithm>
#include <numeric>

#include "core/error.h"

namespace mlaserve::grammar {

VocabularyTrie build_vocabulary_trie(const std::vector<std::string>& token_bytes) {
  std::vector<int32_t> ids(token_bytes.size());
  std::iota(ids.begin(), ids.end(), 0);
  std::erase_if(ids, [&](int32_t id) { return token_bytes[static_cast<size_t>(id)].empty(); });
  std::stable_sort(ids.begin(), ids.end(), [&](int32_t a, int32_t b) {
    return token_bytes[static_cast<size_t>(a)] < token_bytes[static_cast<size_t>(b)];
  });
  VocabularyTrie trie;
  std::vector<int32_t> path;  // path[d] is the open node at depth d + 1
  const auto close_to = [&](size_t depth) {
    for (; path.size() > depth; path.pop_back())
      trie.subtree_end[static_cast<size_t>(path.back())] = trie.node_count();
  };
  std::string_view previous;
  for (const int32_t id : ids) {
    const std::string& bytes = token_bytes[static_cast<size_t>(id)];
    if (bytes.size() > UINT16_MAX) fail("token {} is longer than {} bytes", id, UINT16_MAX);
    const size_t shared = static_cast<size_t>(
        std::mismatch(previous.begin(), previous.end(), bytes.begin(), bytes.end()).first -
        previous.begin());
    close_to(shared);
    for (size_t d = shared; d < bytes.size(); ++d) {
      path.push_back(trie.node_count());
      trie.byte.push_back(static_cast<uint8_t>(bytes[d]));
      trie.depth.push_back(static_cast<uint16_t>(d + 1));
      trie.subtree_end.push_back(0);
      trie.token_begin.push_back(static_cast<int32_t>(trie.token_ids.size()));
    }
    trie.token_ids.push_back(id);  // at the node just opened, or a duplicate's node
    trie.max_depth = std::max(trie.max_depth, static_cast<int32_t>(bytes.size()));
    previous = bytes;
  }
  close_to(0);
  trie.token_begin.push_back(static_cast<int32_t>(trie.token_ids.size()));
  return trie;
}

}  // namespace mlaserve::grammar
