#include "tokenizer/merge_table.h"

#include <bit>

namespace mlaserve::tokenizer {

MergeTable::MergeTable(size_t max_rules) {
  // At most half full, so that probe sequences stay short.
  const size_t slot_count = std::bit_ceil(std::max<size_t>(max_rules * 2, 16));
  slots_.resize(slot_count);
  shift_ = 64 - std::countr_zero(slot_count);
}

void MergeTable::insert(int32_t left_id, int32_t right_id, MergeRule rule) {
  const uint64_t key = key_of(left_id, right_id);
  const size_t mask = slots_.size() - 1;
  for (size_t slot = home_slot(key);; slot = (slot + 1) & mask) {
    if (slots_[slot].key == key) return;
    if (slots_[slot].key == kEmpty) {
      slots_[slot] = {key, rule};
      return;
    }
  }
}

std::optional<MergeRule> MergeTable::find(int32_t left_id, int32_t right_id) const {
  const uint64_t key = key_of(left_id, right_id);
  const size_t mask = slots_.size() - 1;
  for (size_t slot = home_slot(key);; slot = (slot + 1) & mask) {
    if (slots_[slot].key == key) return slots_[slot].rule;
    if (slots_[slot].key == kEmpty) return std::nullopt;
  }
}

}  // namespace mlaserve::tokenizer
