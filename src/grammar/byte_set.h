// A set of byte values (0..255): the terminal symbol of every grammar rule.
#pragma once

#include <array>
#include <cstdint>

namespace mlaserve::grammar {

class ByteSet {
 public:
  static ByteSet of(uint8_t byte) { return range(byte, byte); }
  static ByteSet range(uint8_t first, uint8_t last) {
    ByteSet set;
    for (int b = first; b <= last; ++b) set.add(static_cast<uint8_t>(b));
    return set;
  }

  void add(uint8_t byte) { words_[byte >> 6] |= uint64_t{1} << (byte & 63); }
  bool contains(uint8_t byte) const { return (words_[byte >> 6] >> (byte & 63)) & 1; }
  bool empty() const { return (words_[0] | words_[1] | words_[2] | words_[3]) == 0; }
  ByteSet& operator|=(const ByteSet& other) {
    for (int i = 0; i < 4; ++i) words_[i] |= other.words_[i];
    return *this;
  }
  bool operator==(const ByteSet& other) const = default;
  // Bit (b % 64) of word b / 64 is byte b.
  const std::array<uint64_t, 4>& words() const { return words_; }

 private:
  std::array<uint64_t, 4> words_{};
};

}  // namespace mlaserve::grammar
