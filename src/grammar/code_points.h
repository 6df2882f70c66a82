// Sets of Unicode code points as grammar rules over their UTF-8 encodings (what a regex class, '.'
// or a JSON string character matches), and the small UTF-8 helpers the front ends need.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "grammar/byte_set.h"
#include "grammar/rule_set.h"

namespace mlaserve::grammar {

inline constexpr char32_t kMaxCodePoint = 0x10FFFF;

struct CodePointRange {
  char32_t first;
  char32_t last;  // inclusive
};

// The code points in [0, kMaxCodePoint] outside `ranges`.
std::vector<CodePointRange> complement(std::vector<CodePointRange> ranges);

// The UTF-8 encodings of the code points in `ranges`, surrogates (U+D800..U+DFFF) left out, as
// sequences of byte sets: e.g. U+0800..U+0FFF is {E0}{A0-BF}{80-BF}. The one-byte encodings come
// first, merged into one set. Empty when no code point is left.
std::vector<std::vector<ByteSet>> utf8_sequences(std::vector<CodePointRange> ranges);

// A rule matching one code point of `ranges` (at least one must be left, surrogates aside).
RuleSet::Rule code_point_rule(RuleSet& rules, const std::vector<CodePointRange>& ranges);

std::string utf8_encode(char32_t code_point);
// Decodes the well-formed UTF-8 character at text[pos] and moves pos past it; nullopt (pos
// unchanged) for malformed bytes, overlong forms and surrogates.
std::optional<char32_t> utf8_decode(std::string_view text, size_t& pos);

}  // namespace mlaserve::grammar
