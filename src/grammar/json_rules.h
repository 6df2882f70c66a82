// The pieces of JSON's grammar (RFC 8259) as rules: bounded whitespace, strings of well-formed
// UTF-8 with escapes, numbers, objects, arrays and any value. The bounds keep generation finite
// (a model cannot pad with whitespace or digits forever) and are generous for real output.
// Values are written without leading or trailing whitespace.
#pragma once

#include <optional>
#include <string>

#include "grammar/rule_set.h"

namespace mlaserve::grammar {

// Whitespace between tokens: at most one space, so answers are single-line JSON. Allowing
// newlines and indentation let a sampled model spend its budget on them: brown-tiny at
// temperature 1 padded most gaps with 20 spaces and ran out of 160 tokens mid-object. (vLLM and
// xgrammar offer the same restriction, as "disable any whitespace".)
inline constexpr int kMaxWhitespace = 1;
// Digits: integer part (an integer's too), fraction, exponent.
inline constexpr int kMaxIntegerDigits = 20;
inline constexpr int kMaxFractionDigits = 20;
inline constexpr int kMaxExponentDigits = 3;

class JsonRules {
 public:
  using Rule = RuleSet::Rule;

  explicit JsonRules(RuleSet& rules) : rules_(rules) {}

  Rule whitespace();  // " "{0,kMaxWhitespace}
  // A string of min_chars to max_chars characters (code points: an escape is one, and so is an
  // escaped surrogate pair). Lone surrogates, even escaped, are not allowed.
  Rule string(int64_t min_chars, std::optional<int64_t> max_chars);
  Rule number();   // -?(0|[1-9][0-9]{0,19})(\.[0-9]{1,20})?([eE][+-]?[0-9]{1,3})?
  Rule integer();  // -?(0|[1-9][0-9]{0,19})
  Rule boolean();  // true | false
  Rule null();
  Rule value();  // any JSON value, nested to any depth
  // "key" ws ':' ws value ws, the key written as nlohmann::json dumps it.
  Rule member(const std::string& key, Rule value);
  // '{' ws (member (',' ws member)*)? '}' with any string keys and values of `value`.
  Rule object(Rule value);
  // '[' ws (item ws (',' ws item ws){min-1,max-1})? ']'.
  Rule array(Rule item, int64_t min_items, std::optional<int64_t> max_items);

 private:
  Rule string_character();
  Rule unicode_escape();
  Rule digits(int64_t min, int64_t max);

  RuleSet& rules_;
  std::optional<Rule> whitespace_, character_, number_, integer_, value_;
};

}  // namespace mlaserve::grammar
