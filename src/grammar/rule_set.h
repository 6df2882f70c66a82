// The grammar under construction: rules whose alternatives are sequences of symbols (one byte
// from a set, or a match of another rule), and the combinators that the front ends (JSON schema,
// regex, GrammarBuilder) write grammars with. flat_grammar.h turns a RuleSet into what the
// recognizer runs.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "grammar/byte_set.h"

namespace mlaserve::grammar {

// Largest count a repetition may have (maxLength, maxItems, {n,m}): each count is a rule and a
// recognizer state of its own.
inline constexpr int64_t kMaxRepeatCount = 10000;
// Largest grammar, in symbols, so that an adversarial schema fails to compile instead of
// exhausting memory.
inline constexpr int64_t kMaxSymbols = int64_t{1} << 22;

struct Symbol {
  enum class Kind : uint8_t { Bytes, Rule };
  Kind kind;
  int32_t index;  // into RuleSet::byte_sets() or the rules
};
using Alternative = std::vector<Symbol>;

class RuleSet {
 public:
  using Rule = int32_t;

  Rule empty() { return literal(""); }
  Rule bytes(const ByteSet& set);  // one byte from the set
  Rule literal(std::string_view bytes);
  Rule sequence(std::vector<Rule> parts);
  // Alternatives that are all literals become one trie (shared prefixes read once), so that an
  // enum of many values keeps one parse alive, not one per value.
  Rule choice(std::vector<Rule> alternatives);
  Rule optional(Rule item) { return choice({empty(), item}); }
  // item{min,max}, or item{min,} when max is nullopt. Counts above kMaxRepeatCount throw.
  Rule repeat(Rule item, int64_t min, std::optional<int64_t> max);
  // item (separator item){min - 1, max - 1}: min >= 1 to max items with separators between them.
  Rule separated(Rule item, Rule separator, int64_t min, std::optional<int64_t> max);
  // A rule to define later, so that rules can refer to it before it exists (recursion). One left
  // undefined matches nothing.
  Rule declare() { return add({}); }
  void define(Rule declared, Rule body);

  int32_t rule_count() const { return static_cast<int32_t>(rules_.size()); }
  const std::vector<Alternative>& alternatives(Rule rule) const { return rules_.at(rule); }
  const std::vector<ByteSet>& byte_sets() const { return byte_sets_; }

 private:
  Rule add(std::vector<Alternative> alternatives);
  Rule literal_choice(std::vector<std::string> literals);
  // Matches the sorted, distinct literals [begin, end), which share their first `depth` bytes,
  // from byte `depth` on.
  Rule literal_trie(const std::vector<std::string>& sorted, size_t begin, size_t end, size_t depth);
  Symbol byte_symbol(const ByteSet& set);

  std::vector<std::vector<Alternative>> rules_;
  std::vector<std::optional<std::string>> literal_of_;  // the bytes of rules made by literal()
  std::vector<ByteSet> byte_sets_;
  std::map<std::array<uint64_t, 4>, int32_t> byte_set_index_;
  int64_t symbols_ = 0;
};

}  // namespace mlaserve::grammar
