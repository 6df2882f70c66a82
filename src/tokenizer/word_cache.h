// Encoded words, remembered because text repeats words. Direct-mapped: a word's hash picks one
// slot and a new word simply replaces what was there, so nothing is allocated after construction
// and nothing needs evicting. Thread-safe.
#pragma once

#include <array>
#include <cstdint>
#include <mutex>
#include <span>
#include <string_view>
#include <vector>

namespace mlaserve::tokenizer {

class WordCache {
 public:
  static constexpr size_t kMaxWordBytes = 30;  // longer words are not cached
  static constexpr size_t kMaxIds = 8;         // nor words of more tokens

  WordCache();

  // Appends the cached ids of `word` to `ids`; false if it is not cached.
  bool lookup(std::string_view word, std::vector<int32_t>& ids) const;
  void store(std::string_view word, std::span<const int32_t> ids);

 private:
  static constexpr size_t kSlots = 1 << 15;
  struct Slot {
    size_t hash = 0;
    uint8_t word_length = 0;
    uint8_t id_count = 0;  // 0: empty slot
    std::array<char, kMaxWordBytes> word{};
    std::array<int32_t, kMaxIds> ids{};
  };

  mutable std::mutex mutex_;
  std::vector<Slot> slots_;
};

}  // namespace mlaserve::tokenizer
