// The grammar in the form the recognizer runs: the alternatives of every rule reachable from the
// root laid out in one array of elements, each alternative ending in End. A position in the
// grammar is an index into that array.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "grammar/byte_set.h"
#include "grammar/rule_set.h"

namespace mlaserve::grammar {

struct Element {
  enum class Kind : uint8_t { Bytes, Rule, End };
  Kind kind;
  int32_t index;  // Bytes: into byte_sets; Rule: a rule id; End: unused
};

struct FlatGrammar {
  std::vector<ByteSet> byte_sets;
  std::vector<Element> code;
  // Rule r's alternatives start at code positions alternative_starts[rule_begin[r] ..
  // rule_begin[r + 1]).
  std::vector<int32_t> rule_begin;
  std::vector<int32_t> alternative_starts;
  int32_t root = 0;

  std::span<const int32_t> alternatives(int32_t rule) const {
    return std::span(alternative_starts)
        .subspan(static_cast<size_t>(rule_begin[rule]),
                 static_cast<size_t>(rule_begin[rule + 1] - rule_begin[rule]));
  }
};

// Inlines rules of one alternative into their users (shallower parse stacks), keeps the rules
// reachable from root, drops alternatives that can never complete, and checks what would make
// the recognizer loop: throws GrammarError when root matches no finite string or when a rule can
// reach itself, without reading a byte, other than by a tail call.
FlatGrammar flatten(const RuleSet& rules, RuleSet::Rule root);

}  // namespace mlaserve::grammar
