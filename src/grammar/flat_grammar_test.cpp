// Flattening: inlining keeps the language, literal choices become one trie, and the grammars
// that would make the recognizer loop or never finish are refused.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "grammar/compiled_grammar.h"
#include "grammar/flat_grammar.h"
#include "grammar/grammar_test_util.h"
#include "grammar/rule_set.h"

namespace mlaserve::grammar {
namespace {

using testing::Match;

void expect_refused(const RuleSet& rules, RuleSet::Rule root, const std::string& message) {
  try {
    flatten(rules, root);
    ADD_FAILURE() << "flattened";
  } catch (const GrammarError& e) {
    EXPECT_THAT(e.what(), ::testing::HasSubstr(message));
  }
}

TEST(FlatGrammar, RefusesLeftRecursionThatPushes) {
  // a := a "x" | "y": each expansion of a would push the return to "x".
  RuleSet rules;
  const RuleSet::Rule a = rules.declare();
  rules.define(a, rules.choice({rules.sequence({a, rules.literal("x")}), rules.literal("y")}));
  expect_refused(rules, a, "left-recursive");

  // b := c b "x" | "y" with c nullable: the same through a rule that may read nothing.
  RuleSet nullable;
  const RuleSet::Rule b = nullable.declare();
  const RuleSet::Rule c = nullable.optional(nullable.literal("z"));
  nullable.define(b, nullable.choice({nullable.sequence({c, b, nullable.literal("x")}),
                                      nullable.literal("y")}));
  expect_refused(nullable, b, "left-recursive");
}

TEST(FlatGrammar, AcceptsTailRecursionWithoutInput) {
  // s := "" | t s with t nullable: a tail call back to s revisits the same parse.
  RuleSet rules;
  const RuleSet::Rule s = rules.declare();
  const RuleSet::Rule t = rules.optional(rules.literal("a"));
  rules.define(s, rules.optional(rules.sequence({t, s})));
  const GrammarPtr grammar = std::make_shared<const Grammar>(flatten(rules, s));
  EXPECT_EQ(testing::match(grammar, "aaa"), Match::Complete);
  EXPECT_EQ(testing::match(grammar, "ab"), Match::Rejected);
}

TEST(FlatGrammar, RefusesGrammarsWithNoCompleteString) {
  RuleSet rules;
  const RuleSet::Rule a = rules.declare();
  rules.define(a, rules.sequence({rules.literal("x"), a}));
  expect_refused(rules, a, "matches no complete string");
}

TEST(FlatGrammar, DropsAlternativesThatCannotComplete) {
  // "a" followed by endless recursion is never offered: only "b" remains.
  RuleSet rules;
  const RuleSet::Rule endless = rules.declare();
  rules.define(endless, rules.sequence({rules.literal("y"), endless}));
  const RuleSet::Rule root =
      rules.choice({rules.sequence({rules.literal("a"), endless}), rules.literal("b")});
  const GrammarPtr grammar = std::make_shared<const Grammar>(flatten(rules, root));
  EXPECT_EQ(testing::match(grammar, "a"), Match::Rejected);
  EXPECT_EQ(testing::match(grammar, "b"), Match::Complete);
}

TEST(FlatGrammar, LiteralChoicesShareOneParse) {
  // 3000 literals with long shared prefixes: as separate alternatives they would be 3000 live
  // parses (over kMaxParses); as a trie they are one.
  RuleSet rules;
  std::vector<RuleSet::Rule> literals;
  for (int i = 0; i < 3000; ++i) literals.push_back(rules.literal("value-" + std::to_string(i)));
  const GrammarPtr grammar =
      std::make_shared<const Grammar>(flatten(rules, rules.choice(std::move(literals))));
  EXPECT_EQ(testing::match(grammar, "value-2999"), Match::Complete);
  EXPECT_EQ(testing::match(grammar, "value-29"), Match::Complete);
  EXPECT_EQ(testing::match(grammar, "value-3000"), Match::Rejected);
}

TEST(FlatGrammar, TooManyParsesIsAnError) {
  // "v" then 3000 different rules that all read a digit first (not literals, so no trie).
  RuleSet rules;
  std::vector<RuleSet::Rule> alternatives;
  for (int i = 0; i < 3000; ++i) {
    alternatives.push_back(
        rules.sequence({rules.bytes(ByteSet::range('0', '9')), rules.literal(std::to_string(i))}));
  }
  const RuleSet::Rule root =
      rules.sequence({rules.literal("v"), rules.choice(std::move(alternatives))});
  const GrammarPtr grammar = std::make_shared<const Grammar>(flatten(rules, root));
  GrammarMatcher matcher(grammar, testing::byte_vocabulary());
  EXPECT_THROW(matcher.accept_bytes("v"), GrammarError);
}

}  // namespace
}  // namespace mlaserve::grammar
