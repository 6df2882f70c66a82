// Regex grammars: a table of patterns and strings (whole match, prefix, rejected), and every
// refused construct named in a GrammarError.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "grammar/grammar.h"
#include "grammar/grammar_test_util.h"

namespace mlaserve::grammar {
namespace {

using testing::Match;

struct RegexCase {
  std::string pattern;
  std::vector<std::string> complete;
  std::vector<std::string> prefix;
  std::vector<std::string> rejected;
};

TEST(RegexGrammar, MatchesWholeStrings) {
  const std::vector<RegexCase> cases = {
      {"abc", {"abc"}, {"", "a", "ab"}, {"abcd", "b", "abd"}},
      {"^abc$", {"abc"}, {"ab"}, {"abcabc"}},
      {"", {""}, {}, {"a"}},
      {"a|bc|", {"a", "bc", ""}, {"b"}, {"ab", "c"}},
      {"(ab)*", {"", "ab", "abab"}, {"a", "aba"}, {"b", "abb"}},
      {"(?:ab)+c", {"abc", "ababc"}, {"ab", "abab"}, {"c", "abac"}},
      {"a?b", {"ab", "b"}, {"a"}, {"aab"}},
      {"a{3}", {"aaa"}, {"aa"}, {"aaaa"}},
      {"a{2,}", {"aa", "aaaaaa"}, {"a"}, {"b"}},
      {"a{,2}", {"", "a", "aa"}, {}, {"aaa"}},
      {"a{1,3}b", {"ab", "aaab"}, {"aaa"}, {"aaaab", "b"}},
      {"x{", {"x{"}, {"x"}, {"xx"}},
      {"\\d+\\.\\d{2}", {"12.50"}, {"12", "12.5"}, {"12.505", "a"}},
      {"\\w\\s\\W", {"a !", "_\t\xc3\xa9"}, {"a "}, {"  !", "a a"}},
      {"\\D\\S", {"a\xe2\x82\xac"}, {"x"}, {"1a", "a "}},
      {"[abc]+", {"abcab"}, {""}, {"abd"}},
      {"[a-cx-z]", {"b", "y"}, {""}, {"d", "w"}},
      {"[^a-c\\n]", {"d", "\xf0\x9f\x98\x80", "-"}, {"\xf0\x9f"}, {"a", "\n"}},
      {"[\\d\\-.]+", {"1-2.3"}, {}, {"a"}},
      {"[]a]", {"]", "a"}, {}, {"b"}},
      {"[\xce\xb1-\xcf\x89]", {"\xce\xb2"}, {"\xce"}, {"a", "\xce\x91"}},
      {".", {"a", "\xe2\x82\xac", "\t"}, {"\xe2\x82"}, {"\n", "ab", "\xff"}},
      {"\\x41\\u00e9\\t\\.\\\\\\(", {"A\xc3\xa9\t.\\("}, {"A"}, {"Ae"}},
      {"caf\xc3\xa9|na\xc3\xafve", {"caf\xc3\xa9", "na\xc3\xafve"}, {"caf\xc3"}, {"cafe"}},
      {"(a|b)(c|d)*$", {"a", "bcdc"}, {}, {"c", "ab"}},
      {"(a*)*b", {"b", "aab"}, {"aaa"}, {"c"}},
      {"(|a)+", {"", "aaa"}, {}, {"b"}},
      {"\\{\"name\": \"[a-z]+\"\\}", {"{\"name\": \"bob\"}"}, {"{\"name\": \""}, {"{}"}},
  };
  for (const RegexCase& c : cases) {
    SCOPED_TRACE("pattern " + c.pattern);
    const GrammarPtr grammar = regex_grammar(c.pattern);
    for (const std::string& s : c.complete)
      EXPECT_EQ(testing::match(grammar, s), Match::Complete) << s;
    for (const std::string& s : c.prefix) EXPECT_EQ(testing::match(grammar, s), Match::Prefix) << s;
    for (const std::string& s : c.rejected)
      EXPECT_EQ(testing::match(grammar, s), Match::Rejected) << s;
  }
}

TEST(RegexGrammar, MustEndWhenNothingMayFollow) {
  GrammarMatcher matcher(regex_grammar("ab?"), testing::byte_vocabulary());
  ASSERT_TRUE(matcher.accept_bytes("a"));
  EXPECT_TRUE(matcher.can_end());
  EXPECT_FALSE(matcher.must_end());
  ASSERT_TRUE(matcher.accept_bytes("b"));
  EXPECT_TRUE(matcher.must_end());
}

struct Refusal {
  std::string pattern;
  std::string construct;  // keyword()
  std::string message;    // a part of what()
};

TEST(RegexGrammar, RefusesWhatIsOutsideTheSubset) {
  const std::vector<Refusal> refusals = {
      {"a*?", "*?", "lazy quantifier '*?' is not supported (at byte 1)"},
      {"a{2,3}?", "{2,3}?", "lazy quantifier"},
      {"a++", "++", "possessive quantifier"},
      {"(a)\\1", "\\1", "backreference '\\1' is not supported (at byte 3)"},
      {"(?P<x>a)(?P=x)", "(?P<", "named group"},
      {"(?<x>a)", "(?<", "named group"},
      {"a(?=b)", "(?=", "lookahead '(?=' is not supported (at byte 1)"},
      {"a(?!b)", "(?!", "lookahead"},
      {"(?<=a)b", "(?<=", "lookbehind"},
      {"(?<!a)b", "(?<!", "lookbehind"},
      {"(?i)a", "(?i", "inline flags"},
      {"a\\bc", "\\b", "anchor '\\b'"},
      {"\\Aa", "\\A", "anchor"},
      {"a\\Z", "\\Z", "anchor"},
      {"a^b", "^", "anchor (only as the first character) '^'"},
      {"a$b", "$", "anchor (only as the last character) '$'"},
      {"\\k<x>", "\\k", "backreference"},
      {"\\p{L}", "\\p", "Unicode property class"},
      {"\\q", "\\q", "unknown escape"},
  };
  for (const Refusal& r : refusals) {
    try {
      regex_grammar(r.pattern);
      ADD_FAILURE() << r.pattern << " compiled";
    } catch (const GrammarError& e) {
      EXPECT_EQ(e.keyword(), r.construct) << r.pattern;
      EXPECT_THAT(e.what(), ::testing::HasSubstr("regex: " + r.message)) << r.pattern;
      EXPECT_THAT(e.what(), ::testing::HasSubstr("supported: literal characters")) << r.pattern;
    }
  }
}

TEST(RegexGrammar, SyntaxErrorsSayWhere) {
  const std::vector<std::pair<std::string, std::string>> errors = {
      {"(ab", "missing ')' (at byte 0)"},
      {"ab)", "unbalanced ')' (at byte 2)"},
      {"[ab", "missing ']' (at byte 0)"},
      {"*a", "nothing to repeat (at byte 0)"},
      {"a|+", "nothing to repeat (at byte 2)"},
      {"a**", "multiple repeat (at byte 2)"},
      {"a{3,2}", "m below n"},
      {"a{10001}", "repetition count above 10000"},
      {"[z-a]", "range out of order"},
      {"[a-\\d]", "a class escape cannot end a range"},
      {"[^\\s\\S]", "class matches no character"},
      {"a\\", "trailing backslash"},
      {"\\x4", "escape needs 2 hex digits"},
      {"\\ud800", "escape of a surrogate"},
      {"a\xff", "invalid UTF-8 (at byte 1)"},
  };
  for (const auto& [pattern, message] : errors) {
    try {
      regex_grammar(pattern);
      ADD_FAILURE() << pattern << " compiled";
    } catch (const GrammarError& e) {
      EXPECT_EQ(e.keyword(), "") << pattern;
      EXPECT_THAT(e.what(), ::testing::HasSubstr(message)) << pattern;
    }
  }
}

}  // namespace
}  // namespace mlaserve::grammar
