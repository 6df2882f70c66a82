// Regular expressions, the subset for SGLang's `regex` sampling parameter, compiled to rules
// matching the whole output (as if anchored at both ends). The pattern is UTF-8 and matches code
// points, Python-style.
//
// Supported: literal characters; escapes \d \w \s (ASCII digits, [A-Za-z0-9_], [ \t\n\r\f\v]) and
// \D \W \S (every other code point), \n \t \r \f \v, \xHH, \uXXXX and any escaped punctuation;
// '.' (any code point but \n); classes [abc] [a-z] [^...] with those escapes inside; groups (...)
// and (?:...); alternation |; quantifiers * + ? {n} {n,} {,m} {n,m} (counts up to 10000);
// '^' as the first and '$' as the last character (ignored: the match is always whole). A '{'
// that does not start a quantifier is a literal, as in Python.
// Refused, with a GrammarError naming the construct (keyword()) and its byte offset: lazy and
// possessive quantifiers, backreferences, lookaround, named groups and inline flags, other
// anchors (\b \B \A \Z \z, '^' or '$' elsewhere), unknown escapes.
#pragma once

#include <string_view>

#include "grammar/rule_set.h"

namespace mlaserve::grammar {

RuleSet::Rule compile_regex(RuleSet& rules, std::string_view pattern);

}  // namespace mlaserve::grammar
