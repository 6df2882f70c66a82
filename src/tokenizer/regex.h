// PCRE2 (UTF + UCP + JIT) regexes for the pre-tokenizer's Split patterns.
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace mlaserve::tokenizer {

struct Match {
  size_t begin;
  size_t end;
};

class Regex {
 public:
  // Compiles a pattern written for Oniguruma, the engine HF tokenizers runs tokenizer.json
  // patterns with (see translate_oniguruma for the differences that are bridged).
  static Regex from_oniguruma(std::string_view pattern);
  // A regex that matches `text` literally (a Split pattern given as {"String": ...}).
  static Regex literal(std::string_view text);

  // Appends every non-empty match in `text`, left to right, to `matches`. `text` must be valid
  // UTF-8 (it is not checked again here).
  void find_all(std::string_view text, std::vector<Match>& matches) const;

 private:
  struct Code;
  Regex(std::string_view pattern, bool literal);
  std::shared_ptr<const Code> code_;
  std::string pattern_;  // kept for error messages
};

// Rewrites the Oniguruma escapes whose meaning differs in PCRE2 with UCP: \s and \S (Oniguruma:
// the White_Space property; PCRE2 also counts U+180E), \w and \W (Oniguruma: letters, marks,
// decimal digits and connector punctuation), and rejects \h/\H (hex digit in Oniguruma,
// horizontal space in PCRE2) and nested character classes, with an Error naming the pattern.
std::string translate_oniguruma(std::string_view pattern);

}  // namespace mlaserve::tokenizer
