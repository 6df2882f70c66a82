#include "grammar/code_points.h"

#include <algorithm>

namespace mlaserve::grammar {
namespace {

constexpr CodePointRange kSurrogates = {0xD800, 0xDFFF};
// Last code point of the 1-, 2- and 3-byte encodings.
constexpr char32_t kEncodingEnds[] = {0x7F, 0x7FF, 0xFFFF};

// Sorted, merged, clipped to the code space, surrogates removed.
std::vector<CodePointRange> normalized(std::vector<CodePointRange> ranges) {
  std::erase_if(ranges,
                [](CodePointRange r) { return r.first > r.last || r.first > kMaxCodePoint; });
  std::sort(ranges.begin(), ranges.end(),
            [](CodePointRange a, CodePointRange b) { return a.first < b.first; });
  std::vector<CodePointRange> merged;
  for (CodePointRange r : ranges) {
    r.last = std::min(r.last, kMaxCodePoint);
    if (!merged.empty() && r.first <= merged.back().last + 1) {
      merged.back().last = std::max(merged.back().last, r.last);
    } else {
      merged.push_back(r);
    }
  }
  std::vector<CodePointRange> result;
  for (const CodePointRange r : merged) {
    if (r.last < kSurrogates.first || r.first > kSurrogates.last) {
      result.push_back(r);
      continue;
    }
    if (r.first < kSurrogates.first) result.push_back({r.first, kSurrogates.first - 1});
    if (r.last > kSurrogates.last) result.push_back({kSurrogates.last + 1, r.last});
  }
  return result;
}

// Appends the byte-set sequences of [first, last], whose code points all have the same encoding
// length: splits the range until, byte by byte, each encoding's bytes span full ranges (the
// classic construction, as in RE2 and Rust's regex-syntax).
void append_sequences(char32_t first, char32_t last, std::vector<std::vector<ByteSet>>& out) {
  const std::string first_bytes = utf8_encode(first);
  for (size_t i = 1; i < first_bytes.size(); ++i) {
    const char32_t low_bits = (char32_t{1} << (6 * i)) - 1;
    if ((first & ~low_bits) == (last & ~low_bits)) continue;
    if ((first & low_bits) != 0) {
      append_sequences(first, first | low_bits, out);
      append_sequences((first | low_bits) + 1, last, out);
      return;
    }
    if ((last & low_bits) != low_bits) {
      append_sequences(first, (last & ~low_bits) - 1, out);
      append_sequences(last & ~low_bits, last, out);
      return;
    }
  }
  const std::string last_bytes = utf8_encode(last);
  std::vector<ByteSet> sequence;
  for (size_t i = 0; i < first_bytes.size(); ++i) {
    sequence.push_back(
        ByteSet::range(static_cast<uint8_t>(first_bytes[i]), static_cast<uint8_t>(last_bytes[i])));
  }
  out.push_back(std::move(sequence));
}

}  // namespace

std::vector<CodePointRange> complement(std::vector<CodePointRange> ranges) {
  std::vector<CodePointRange> result;
  char32_t next = 0;
  for (const CodePointRange r : normalized(std::move(ranges))) {
    if (r.first > next) result.push_back({next, r.first - 1});
    next = r.last + 1;
  }
  if (next <= kMaxCodePoint) result.push_back({next, kMaxCodePoint});
  return result;
}

std::vector<std::vector<ByteSet>> utf8_sequences(std::vector<CodePointRange> ranges) {
  std::vector<std::vector<ByteSet>> sequences;
  ByteSet one_byte;
  for (CodePointRange r : normalized(std::move(ranges))) {
    for (const char32_t end : kEncodingEnds) {
      if (r.first > end) continue;
      const char32_t piece_last = std::min(r.last, end);
      if (end == 0x7F) {
        one_byte |= ByteSet::range(static_cast<uint8_t>(r.first), static_cast<uint8_t>(piece_last));
      } else {
        append_sequences(r.first, piece_last, sequences);
      }
      if (r.last <= end) break;
      r.first = end + 1;
    }
    if (r.first > 0xFFFF) append_sequences(r.first, r.last, sequences);
  }
  if (!one_byte.empty()) sequences.insert(sequences.begin(), {one_byte});
  return sequences;
}

RuleSet::Rule code_point_rule(RuleSet& rules, const std::vector<CodePointRange>& ranges) {
  std::vector<RuleSet::Rule> alternatives;
  for (const std::vector<ByteSet>& sequence : utf8_sequences(ranges)) {
    std::vector<RuleSet::Rule> bytes;
    for (const ByteSet& set : sequence) bytes.push_back(rules.bytes(set));
    alternatives.push_back(rules.sequence(std::move(bytes)));
  }
  return rules.choice(std::move(alternatives));
}

std::string utf8_encode(char32_t c) {
  std::string out;
  const auto byte = [&](char32_t b) { out.push_back(static_cast<char>(b)); };
  if (c < 0x80) {
    byte(c);
  } else if (c < 0x800) {
    byte(0xC0 | (c >> 6));
    byte(0x80 | (c & 0x3F));
  } else if (c < 0x10000) {
    byte(0xE0 | (c >> 12));
    byte(0x80 | ((c >> 6) & 0x3F));
    byte(0x80 | (c & 0x3F));
  } else {
    byte(0xF0 | (c >> 18));
    byte(0x80 | ((c >> 12) & 0x3F));
    byte(0x80 | ((c >> 6) & 0x3F));
    byte(0x80 | (c & 0x3F));
  }
  return out;
}

std::optional<char32_t> utf8_decode(std::string_view text, size_t& pos) {
  if (pos >= text.size()) return std::nullopt;
  const auto lead = static_cast<uint8_t>(text[pos]);
  const size_t length = lead < 0x80   ? 1
                        : lead < 0xC0 ? 0
                        : lead < 0xE0 ? 2
                        : lead < 0xF0 ? 3
                        : lead < 0xF5 ? 4
                                      : 0;
  if (length == 0 || pos + length > text.size()) return std::nullopt;
  char32_t c = length == 1 ? lead : lead & (0x7F >> length);
  for (size_t i = 1; i < length; ++i) {
    const auto next = static_cast<uint8_t>(text[pos + i]);
    if ((next & 0xC0) != 0x80) return std::nullopt;
    c = (c << 6) | (next & 0x3F);
  }
  constexpr char32_t kSmallestOfLength[] = {0, 0, 0x80, 0x800, 0x10000};
  if (c < kSmallestOfLength[length] || c > kMaxCodePoint ||
      (c >= kSurrogates.first && c <= kSurrogates.last))
    return std::nullopt;
  pos += length;
  return c;
}

}  // namespace mlaserve::grammar
