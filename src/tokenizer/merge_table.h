// The BPE merge rules as a flat open-addressing hash table from a symbol pair to its rank and
// result. Encoding looks up every adjacent pair of every new word, so this lookup is the hot path.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

namespace mlaserve::tokenizer {

struct MergeRule {
  int32_t rank;       // position in the merges list: lower merges first
  int32_t merged_id;  // the token the pair becomes
};

class MergeTable {
 public:
  // `max_rules`: an upper bound on the number of insert calls.
  explicit MergeTable(size_t max_rules);

  // Adds a rule; if the pair already has one, the earlier (lower-rank) rule is kept.
  void insert(int32_t left_id, int32_t right_id, MergeRule rule);
  std::optional<MergeRule> find(int32_t left_id, int32_t right_id) const;

 private:
  static constexpr uint64_t kEmpty = ~uint64_t{0};
  struct Slot {
    uint64_t key = kEmpty;
    MergeRule rule{};
  };

  static uint64_t key_of(int32_t left_id, int32_t right_id) {
    return (uint64_t{static_cast<uint32_t>(left_id)} << 32) | static_cast<uint32_t>(right_id);
  }
  size_t home_slot(uint64_t key) const {
    return static_cast<size_t>((key * 0x9E3779B97F4A7C15ull) >> shift_);
  }

  std::vector<Slot> slots_;
  int shift_;  // 64 - log2(slot count)
};

}  // namespace mlaserve::tokenizer
