// Token string -> id in one flat open-addressing table over one byte buffer. Loading builds one
// for 128k tokens and looks up three strings per merge rule, so it avoids a node per entry.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace mlaserve::tokenizer {

class TokenIdMap {
 public:
  // Adds `token`; returns false (and keeps the existing id) if it is already there.
  bool insert(std::string_view token, int32_t id);
  std::optional<int32_t> find(std::string_view token) const;

  // Calls visit(token, id) for every entry, in insertion order.
  template <typename Visit>
  void for_each(Visit&& visit) const {
    for (const Entry& entry : entries_) visit(token_of(entry), entry.id);
  }

 private:
  struct Entry {
    size_t offset;  // in bytes_
    uint32_t length;
    int32_t id;
    size_t hash;
  };

  std::string_view token_of(const Entry& entry) const {
    return std::string_view(bytes_).substr(entry.offset, entry.length);
  }
  // The slot holding `token`, or the empty slot where it would go.
  size_t probe(std::string_view token, size_t hash) const;
  void grow();

  std::string bytes_;  // all tokens back to back
  std::vector<Entry> entries_;
  std::vector<uint32_t> slots_;  // 1 + index into entries_; 0 marks an empty slot
};

}  // namespace mlaserve::tokenizer
