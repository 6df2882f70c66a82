// Splits a Jinja template into text and tag tokens, applying whitespace control the way HF's
// Jinja environment does: `{%-`/`-%}` (and the same for {{ }} and {# #}), trim_blocks (drop the
// newline after a block tag), lstrip_blocks (drop spaces and tabs before a block tag on its
// line; `{%+` turns that off) and dropping one trailing newline of the template.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace mlaserve::tokenizer::jinja {

enum class TokenKind {
  kText,         // literal template text
  kBlockBegin,   // {%
  kBlockEnd,     // %}
  kOutputBegin,  // {{
  kOutputEnd,    // }}
  kName,
  kString,  // text holds the decoded value
  kInteger,
  kFloat,
  kOperator,  // punctuation such as == or (
  kEnd,       // end of the template
};

struct Token {
  TokenKind kind;
  std::string text;
  int line;
};

std::vector<Token> lex(std::string_view source);

}  // namespace mlaserve::tokenizer::jinja
