// The token masks of recently seen recognizer states for one vocabulary, within a byte budget
// (least recently used dropped first). A mask with few tokens is kept as their ids, a fraction
// of a bitset's size (a bitset of DeepSeek-V3's 129,280 tokens is 16 KB).
#pragma once

#include <cstddef>
#include <cstdint>
#include <list>
#include <span>
#include <unordered_map>
#include <vector>

#include "grammar/recognizer.h"

namespace mlaserve::grammar {

class MaskCache {
 public:
  MaskCache(uint64_t vocabulary_serial, size_t budget_bytes)
      : vocabulary_serial_(vocabulary_serial), budget_bytes_(budget_bytes) {}

  uint64_t vocabulary_serial() const { return vocabulary_serial_; }
  // On a hit, writes the state's mask into `mask` and returns true.
  bool find(StateId state, std::span<uint64_t> mask);
  void insert(StateId state, std::span<const uint64_t> mask);
  size_t memory_bytes() const { return bytes_; }

 private:
  struct Entry {
    StateId state;
    std::vector<uint64_t> words;  // the bitset, or empty when ids holds the mask
    std::vector<int32_t> ids;
  };
  static size_t entry_bytes(const Entry& entry);

  uint64_t vocabulary_serial_;
  size_t budget_bytes_;
  size_t bytes_ = 0;
  std::list<Entry> recent_;  // most recently used first
  std::unordered_map<StateId, std::list<Entry>::iterator> index_;
};

}  // namespace mlaserve::grammar
