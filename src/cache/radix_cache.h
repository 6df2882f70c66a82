// Radix prefix cache over one DP group's KV slots (metadata only, on rank 0; SGLang's
// RadixCache). Each edge holds a run of token ids and the KV slots their latents were written to;
// a new request whose prompt starts with a cached run reuses those slots and extends only the
// suffix. Requests lock the node their match ended at, so the path they read cannot be evicted;
// unlocked leaves are evicted least recently used first when the pool runs short. A request's
// cache salt (vLLM's and SGLang's cache_salt: per-tenant isolation) picks a tree of its own:
// requests with different salts never share an entry, those with the same salt (or none) share
// as before.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <vector>

namespace mlaserve::cache {

class RadixCache {
 public:
  struct Node;
  struct Match {
    std::vector<int32_t> slots;  // KV slots of the longest cached prefix, in token order
    // Node the match ended at (lock it while the slots are in use); null when nothing matched.
    Node* last = nullptr;
  };

  RadixCache();
  ~RadixCache();
  RadixCache(const RadixCache&) = delete;
  RadixCache& operator=(const RadixCache&) = delete;
  RadixCache(RadixCache&&) noexcept;
  RadixCache& operator=(RadixCache&&) noexcept;

  // Longest cached prefix of tokens under `salt`; marks the path as recently used.
  Match match_prefix(std::span<const int32_t> tokens, const std::string& salt = {});

  // Caches tokens[i] -> slots[i] under `salt`. Returns how many leading tokens were already
  // cached: the caller owns slots[k] for k below that count only if they differ from the cached
  // ones, and must free those duplicates (the cache keeps its own).
  int64_t insert(std::span<const int32_t> tokens, std::span<const int32_t> slots,
                 const std::string& salt = {});

  // Lock refs along the path from node to the root: locked tokens are never evicted.
  void lock(Node* node);
  void unlock(Node* node);

  // Removes up to n_tokens (whole leaves, least recently used first) from unlocked leaves and
  // returns their slots for the caller to free. May return more than n_tokens (whole edges).
  std::vector<int32_t> evict(int64_t n_tokens);

  // Drops everything; returns every slot. Only valid when nothing is locked.
  std::vector<int32_t> reset();

  int64_t cached_tokens() const { return evictable_ + protected_; }
  int64_t evictable_tokens() const { return evictable_; }
  int64_t protected_tokens() const { return protected_; }

 private:
  Node* split(Node* node, size_t at);
  Node* root(const std::string& salt);
  // Drops the trees of salts that hold nothing (no match points at a root).
  void drop_empty_salts();

  // One tree per salt; "" (no salt) always exists.
  std::map<std::string, std::unique_ptr<Node>> roots_;
  uint64_t clock_ = 0;  // access counter for LRU
  int64_t evictable_ = 0, protected_ = 0;
};

}  // namespace mlaserve::cache
