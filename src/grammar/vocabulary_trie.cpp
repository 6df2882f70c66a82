#include "grammar/vocabulary_trie.h"

#include <algorithm>
#include <map>
#include <numeric>

#include "core/error.h"

namespace mlaserve::grammar {
namespace {

// Fills in each large subtree's bytes_below, children before parents (reverse preorder).
void index_bytes_below(VocabularyTrie& trie) {
  std::vector<ByteSet> below(trie.nodes.size());
  std::map<std::array<uint64_t, 4>, int32_t> index;
  for (size_t k = static_cast<size_t>(trie.node_count()); k-- > 0;) {
    TrieNode& node = trie.nodes[k];
    for (auto child = static_cast<int32_t>(k + 1); child < node.subtree_end;
         child = trie.nodes[static_cast<size_t>(child)].subtree_end) {
      below[k] |= below[static_cast<size_t>(child)];
      below[k].add(trie.nodes[static_cast<size_t>(child)].byte);
    }
    node.bytes_below = -1;
    if (trie.subtree_tokens(node).size() < static_cast<size_t>(kMinBulkTokens)) continue;
    const auto [it, added] =
        index.try_emplace(below[k].words(), static_cast<int32_t>(trie.bytes_below.size()));
    if (added) trie.bytes_below.push_back(below[k]);
    node.bytes_below = it->second;
  }
}

}  // namespace

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
      trie.nodes[static_cast<size_t>(path.back())].subtree_end =
          static_cast<int32_t>(trie.nodes.size());
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
      path.push_back(static_cast<int32_t>(trie.nodes.size()));
      trie.nodes.push_back({static_cast<uint8_t>(bytes[d]), static_cast<uint16_t>(d + 1), 0,
                            static_cast<int32_t>(trie.token_ids.size()), -1});
    }
    trie.token_ids.push_back(id);  // at the node just opened, or a duplicate's node
    trie.max_depth = std::max(trie.max_depth, static_cast<int32_t>(bytes.size()));
    previous = bytes;
  }
  close_to(0);
  trie.nodes.push_back({0, 0, 0, static_cast<int32_t>(trie.token_ids.size()), -1});
  index_bytes_below(trie);
  return trie;
}

}  // namespace mlaserve::grammar
