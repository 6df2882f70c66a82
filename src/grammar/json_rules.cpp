#include "grammar/json_rules.h"

#include <nlohmann/json.hpp>

#include "grammar/code_points.h"

namespace mlaserve::grammar {
namespace {

ByteSet bytes_of(std::string_view members) {
  ByteSet set;
  for (const char c : members) set.add(static_cast<uint8_t>(c));
  return set;
}

ByteSet hex_digits() {
  ByteSet set = ByteSet::range('0', '9');
  set |= ByteSet::range('a', 'f');
  set |= ByteSet::range('A', 'F');
  return set;
}

}  // namespace

JsonRules::Rule JsonRules::whitespace() {
  if (!whitespace_) whitespace_ = rules_.repeat(rules_.bytes(bytes_of(" ")), 0, kMaxWhitespace);
  return *whitespace_;
}

// \u followed by one UTF-16 unit that is not a surrogate, or by a high surrogate and then
// \u and a low one (what a JSON parser turns into one code point).
JsonRules::Rule JsonRules::unicode_escape() {
  const Rule hex = rules_.bytes(hex_digits());
  const auto set = [&](std::string_view members) { return rules_.bytes(bytes_of(members)); };
  const Rule not_surrogate = rules_.choice({
      rules_.sequence({set("0123456789abcABC"), hex, hex, hex}),
      rules_.sequence({set("dD"), set("01234567"), hex, hex}),
      rules_.sequence({set("eEfF"), hex, hex, hex}),
  });
  const Rule surrogate_pair =
      rules_.sequence({set("dD"), set("89abAB"), hex, hex, rules_.literal("\\u"), set("dD"),
                       set("cdefCDEF"), hex, hex});
  return rules_.sequence({rules_.literal("u"), rules_.choice({not_surrogate, surrogate_pair})});
}

// One character of a string: any code point but '"', '\' and the controls below U+0020, or an
// escape.
JsonRules::Rule JsonRules::string_character() {
  if (character_) return *character_;
  const Rule unescaped =
      code_point_rule(rules_, {{0x20, 0x21}, {0x23, 0x5B}, {0x5D, kMaxCodePoint}});
  const Rule escaped =
      rules_.sequence({rules_.literal("\\"),
                       rules_.choice({rules_.bytes(bytes_of("\"\\/bfnrt")), unicode_escape()})});
  character_ = rules_.choice({unescaped, escaped});
  return *character_;
}

JsonRules::Rule JsonRules::string(int64_t min_chars, std::optional<int64_t> max_chars) {
  const Rule quote = rules_.literal("\"");
  return rules_.sequence({quote, rules_.repeat(string_character(), min_chars, max_chars), quote});
}

JsonRules::Rule JsonRules::digits(int64_t min, int64_t max) {
  return rules_.repeat(rules_.bytes(ByteSet::range('0', '9')), min, max);
}

JsonRules::Rule JsonRules::integer() {
  if (integer_) return *integer_;
  const Rule nonzero =
      rules_.sequence({rules_.bytes(ByteSet::range('1', '9')), digits(0, kMaxIntegerDigits - 1)});
  integer_ = rules_.sequence(
      {rules_.optional(rules_.literal("-")), rules_.choice({rules_.literal("0"), nonzero})});
  return *integer_;
}

JsonRules::Rule JsonRules::number() {
  if (number_) return *number_;
  const Rule fraction = rules_.sequence({rules_.literal("."), digits(1, kMaxFractionDigits)});
  const Rule exponent =
      rules_.sequence({rules_.bytes(bytes_of("eE")), rules_.optional(rules_.bytes(bytes_of("+-"))),
                       digits(1, kMaxExponentDigits)});
  number_ = rules_.sequence({integer(), rules_.optional(fraction), rules_.optional(exponent)});
  return *number_;
}

JsonRules::Rule JsonRules::boolean() {
  return rules_.choice({rules_.literal("true"), rules_.literal("false")});
}

JsonRules::Rule JsonRules::null() {
  return rules_.literal("null");
}

JsonRules::Rule JsonRules::value() {
  if (value_) return *value_;
  value_ = rules_.declare();
  const Rule keywords =
      rules_.choice({rules_.literal("true"), rules_.literal("false"), rules_.literal("null")});
  rules_.define(*value_, rules_.choice({object(*value_), array(*value_, 0, std::nullopt),
                                        string(0, std::nullopt), number(), keywords}));
  return *value_;
}

JsonRules::Rule JsonRules::member(const std::string& key, Rule value) {
  const Rule ws = whitespace();
  return rules_.sequence(
      {rules_.literal(nlohmann::json(key).dump()), ws, rules_.literal(":"), ws, value, ws});
}

JsonRules::Rule JsonRules::object(Rule value) {
  const Rule ws = whitespace();
  const Rule member =
      rules_.sequence({string(0, std::nullopt), ws, rules_.literal(":"), ws, value, ws});
  const Rule members =
      rules_.separated(member, rules_.sequence({rules_.literal(","), ws}), 1, std::nullopt);
  return rules_.sequence({rules_.literal("{"), ws, rules_.optional(members), rules_.literal("}")});
}

JsonRules::Rule JsonRules::array(Rule item, int64_t min_items, std::optional<int64_t> max_items) {
  const Rule ws = whitespace();
  Rule items = rules_.empty();
  if (max_items.value_or(1) > 0) {
    items =
        rules_.separated(rules_.sequence({item, ws}), rules_.sequence({rules_.literal(","), ws}),
                         std::max<int64_t>(min_items, 1), max_items);
    if (min_items == 0) items = rules_.optional(items);
  }
  return rules_.sequence({rules_.literal("["), ws, items, rules_.literal("]")});
}

}  // namespace mlaserve::grammar
