#include "grammar/rule_set.h"

#include <algorithm>

#include "grammar/grammar.h"

namespace mlaserve::grammar {

RuleSet::Rule RuleSet::add(std::vector<Alternative> alternatives) {
  for (const Alternative& alternative : alternatives)
    symbols_ += static_cast<int64_t>(alternative.size()) + 1;
  if (symbols_ > kMaxSymbols)
    throw GrammarError("grammar: too large (more than " + std::to_string(kMaxSymbols) +
                       " symbols)");
  rules_.push_back(std::move(alternatives));
  literal_of_.emplace_back();
  return static_cast<Rule>(rules_.size() - 1);
}

Symbol RuleSet::byte_symbol(const ByteSet& set) {
  const auto [it, added] =
      byte_set_index_.try_emplace(set.words(), static_cast<int32_t>(byte_sets_.size()));
  if (added) byte_sets_.push_back(set);
  return {Symbol::Kind::Bytes, it->second};
}

RuleSet::Rule RuleSet::bytes(const ByteSet& set) {
  return add({{byte_symbol(set)}});
}

RuleSet::Rule RuleSet::literal(std::string_view bytes) {
  Alternative alternative;
  for (const char c : bytes)
    alternative.push_back(byte_symbol(ByteSet::of(static_cast<uint8_t>(c))));
  const Rule rule = add({std::move(alternative)});
  literal_of_[rule] = std::string(bytes);
  return rule;
}

RuleSet::Rule RuleSet::sequence(std::vector<Rule> parts) {
  if (parts.size() == 1) return parts[0];
  std::string joined;
  bool all_literal = true;
  for (const Rule part : parts) {
    all_literal = all_literal && literal_of_.at(part).has_value();
    if (all_literal) joined += *literal_of_[part];
  }
  if (all_literal) return literal(joined);
  Alternative alternative;
  for (const Rule part : parts) alternative.push_back({Symbol::Kind::Rule, part});
  return add({std::move(alternative)});
}

RuleSet::Rule RuleSet::choice(std::vector<Rule> alternatives) {
  if (alternatives.empty()) throw GrammarError("grammar: a choice needs at least one alternative");
  if (alternatives.size() == 1) return alternatives[0];
  std::vector<std::string> literals;
  for (const Rule rule : alternatives) {
    if (!literal_of_.at(rule)) break;
    literals.push_back(*literal_of_[rule]);
  }
  if (literals.size() == alternatives.size()) return literal_choice(std::move(literals));
  std::vector<Alternative> rule_alternatives;
  for (const Rule rule : alternatives) rule_alternatives.push_back({{Symbol::Kind::Rule, rule}});
  return add(std::move(rule_alternatives));
}

RuleSet::Rule RuleSet::literal_choice(std::vector<std::string> literals) {
  std::sort(literals.begin(), literals.end());
  literals.erase(std::unique(literals.begin(), literals.end()), literals.end());
  if (literals.size() == 1) return literal(literals[0]);
  return literal_trie(literals, 0, literals.size(), 0);
}

RuleSet::Rule RuleSet::literal_trie(const std::vector<std::string>& sorted, size_t begin,
                                    size_t end, size_t depth) {
  std::vector<Alternative> alternatives;
  size_t i = begin;
  if (sorted[i].size() == depth) {  // (the shortest sorts first; literals are distinct)
    alternatives.emplace_back();
    ++i;
  }
  while (i < end) {
    const char next = sorted[i][depth];
    size_t group_end = i;
    while (group_end < end && sorted[group_end][depth] == next) ++group_end;
    // The group's shared bytes: sorted, so those of its first and last literal.
    const std::string& first = sorted[i];
    const std::string& last = sorted[group_end - 1];
    size_t shared = depth;
    while (shared < first.size() && shared < last.size() && first[shared] == last[shared]) ++shared;
    Alternative alternative;
    for (size_t k = depth; k < shared; ++k)
      alternative.push_back(byte_symbol(ByteSet::of(static_cast<uint8_t>(first[k]))));
    if (group_end - i > 1)
      alternative.push_back({Symbol::Kind::Rule, literal_trie(sorted, i, group_end, shared)});
    alternatives.push_back(std::move(alternative));
    i = group_end;
  }
  return add(std::move(alternatives));
}

RuleSet::Rule RuleSet::repeat(Rule item, int64_t min, std::optional<int64_t> max) {
  if (min < 0 || (max && *max < min) || min > kMaxRepeatCount || max.value_or(0) > kMaxRepeatCount)
    throw GrammarError("grammar: repetition counts must satisfy 0 <= min <= max <= " +
                       std::to_string(kMaxRepeatCount));
  std::vector<Rule> parts(static_cast<size_t>(min), item);
  if (!max) {
    // star := "" | item star (the recursion is a tail call: the parse stack does not grow).
    const Rule star = declare();
    define(star, optional(sequence({item, star})));
    parts.push_back(star);
  } else if (*max > min) {
    // up_to(k) := "" | item up_to(k - 1), up_to(1) := "" | item.
    Rule up_to = optional(item);
    for (int64_t k = 2; k <= *max - min; ++k) up_to = optional(sequence({item, up_to}));
    parts.push_back(up_to);
  }
  return parts.empty() ? empty() : sequence(std::move(parts));
}

RuleSet::Rule RuleSet::separated(Rule item, Rule separator, int64_t min,
                                 std::optional<int64_t> max) {
  const Rule more = sequence({separator, item});
  return sequence({item, repeat(more, min - 1, max ? std::optional(*max - 1) : std::nullopt)});
}

void RuleSet::define(Rule declared, Rule body) {
  rules_.at(declared) = {{{Symbol::Kind::Rule, body}}};
  symbols_ += 2;
}

}  // namespace mlaserve::grammar
