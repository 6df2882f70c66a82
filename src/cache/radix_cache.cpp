#include "cache/radix_cache.h"

#include <algorithm>
#include <queue>

#include "core/error.h"

namespace mlaserve::cache {

struct RadixCache::Node {
  std::vector<int32_t> key;                           // token ids on the edge from the parent
  std::vector<int32_t> value;                         // their KV slots
  std::map<int32_t, std::unique_ptr<Node>> children;  // by first token of the child's key
  Node* parent = nullptr;
  int64_t lock_ref = 0;
  uint64_t last_access = 0;

  int64_t size() const { return static_cast<int64_t>(key.size()); }
};

namespace {

size_t common_prefix(std::span<const int32_t> a, std::span<const int32_t> b) {
  const size_t n = std::min(a.size(), b.size());
  size_t i = 0;
  while (i < n && a[i] == b[i]) ++i;
  return i;
}

}  // namespace

RadixCache::RadixCache() {
  roots_[""] = std::make_unique<Node>();
}
RadixCache::~RadixCache() = default;
RadixCache::RadixCache(RadixCache&&) noexcept = default;
RadixCache& RadixCache::operator=(RadixCache&&) noexcept = default;

// Cuts node's edge after `at` tokens: a new node takes the first part and becomes node's parent,
// with node's lock count, so locks taken on node still balance along the new path.
RadixCache::Node* RadixCache::split(Node* node, size_t at) {
  auto upper = std::make_unique<Node>();
  upper->key.assign(node->key.begin(), node->key.begin() + static_cast<ptrdiff_t>(at));
  upper->value.assign(node->value.begin(), node->value.begin() + static_cast<ptrdiff_t>(at));
  upper->parent = node->parent;
  upper->lock_ref = node->lock_ref;
  upper->last_access = node->last_access;
  node->key.erase(node->key.begin(), node->key.begin() + static_cast<ptrdiff_t>(at));
  node->value.erase(node->value.begin(), node->value.begin() + static_cast<ptrdiff_t>(at));
  Node* parent = node->parent;
  std::unique_ptr<Node> lower = std::move(parent->children[upper->key.front()]);
  lower->parent = upper.get();
  upper->children[lower->key.front()] = std::move(lower);
  Node* result = upper.get();
  parent->children[result->key.front()] = std::move(upper);
  return result;
}

RadixCache::Node* RadixCache::root(const std::string& salt) {
  std::unique_ptr<Node>& root = roots_[salt];
  if (!root) root = std::make_unique<Node>();
  return root.get();
}

RadixCache::Match RadixCache::match_prefix(std::span<const int32_t> tokens,
                                           const std::string& salt) {
  Match match;
  const auto tree = roots_.find(salt);
  if (tree == roots_.end()) return match;
  Node* node = tree->second.get();
  size_t pos = 0;
  while (pos < tokens.size()) {
    const auto it = node->children.find(tokens[pos]);
    if (it == node->children.end()) break;
    Node* child = it->second.get();
    child->last_access = ++clock_;
    const size_t k = common_prefix(child->key, tokens.subspan(pos));
    if (k < child->key.size()) child = split(child, k);
    match.slots.insert(match.slots.end(), child->value.begin(), child->value.end());
    node = child;
    pos += k;
  }
  if (node->parent) match.last = node;
  return match;
}

int64_t RadixCache::insert(std::span<const int32_t> tokens, std::span<const int32_t> slots,
                           const std::string& salt) {
  if (tokens.size() != slots.size())
    fail("radix insert: {} tokens but {} slots", tokens.size(), slots.size());
  if (tokens.empty()) return 0;
  Node* node = root(salt);
  size_t pos = 0;
  while (pos < tokens.size()) {
    const auto it = node->children.find(tokens[pos]);
    if (it == node->children.end()) {
      auto leaf = std::make_unique<Node>();
      leaf->key.assign(tokens.begin() + static_cast<ptrdiff_t>(pos), tokens.end());
      leaf->value.assign(slots.begin() + static_cast<ptrdiff_t>(pos), slots.end());
      leaf->parent = node;
      leaf->last_access = ++clock_;
      evictable_ += leaf->size();
      node->children[tokens[pos]] = std::move(leaf);
      return static_cast<int64_t>(pos);
    }
    Node* child = it->second.get();
    child->last_access = ++clock_;
    const size_t k = common_prefix(child->key, tokens.subspan(pos));
    if (k < child->key.size()) child = split(child, k);
    node = child;
    pos += k;
  }
  return static_cast<int64_t>(pos);
}

void RadixCache::lock(Node* node) {
  for (; node->parent; node = node->parent) {
    if (node->lock_ref++ == 0) {
      evictable_ -= node->size();
      protected_ += node->size();
    }
  }
}

void RadixCache::unlock(Node* node) {
  for (; node->parent; node = node->parent) {
    if (node->lock_ref <= 0) fail("radix unlock of a node that is not locked");
    if (--node->lock_ref == 0) {
      evictable_ += node->size();
      protected_ -= node->size();
    }
  }
}

std::vector<int32_t> RadixCache::evict(int64_t n_tokens) {
  auto older = [](const Node* a, const Node* b) { return a->last_access > b->last_access; };
  std::priority_queue<Node*, std::vector<Node*>, decltype(older)> leaves(older);
  std::vector<Node*> stack;
  for (auto& [salt, root] : roots_) stack.push_back(root.get());
  while (!stack.empty()) {
    Node* node = stack.back();
    stack.pop_back();
    for (auto& [token, child] : node->children) stack.push_back(child.get());
    if (node->parent && node->children.empty() && node->lock_ref == 0) leaves.push(node);
  }
  std::vector<int32_t> freed;
  while (static_cast<int64_t>(freed.size()) < n_tokens && !leaves.empty()) {
    Node* leaf = leaves.top();
    leaves.pop();
    freed.insert(freed.end(), leaf->value.begin(), leaf->value.end());
    evictable_ -= leaf->size();
    Node* parent = leaf->parent;
    parent->children.erase(leaf->key.front());
    if (parent->parent && parent->children.empty() && parent->lock_ref == 0) leaves.push(parent);
  }
  drop_empty_salts();
  return freed;
}

void RadixCache::drop_empty_salts() {
  std::erase_if(roots_, [](const auto& entry) {
    return !entry.first.empty() && entry.second->children.empty();
  });
}

std::vector<int32_t> RadixCache::reset() {
  if (protected_ > 0) fail("radix reset while {} cached tokens are in use", protected_);
  std::vector<int32_t> freed = evict(evictable_);
  roots_.clear();
  roots_[""] = std::make_unique<Node>();
  return freed;
}

}  // namespace mlaserve::cache
