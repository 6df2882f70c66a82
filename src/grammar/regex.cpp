#include "grammar/regex.h"

#include <optional>
#include <string>
#include <utility>

#include "grammar/code_points.h"
#include "grammar/grammar.h"

namespace mlaserve::grammar {
namespace {

using Rule = RuleSet::Rule;

constexpr std::string_view kSubset =
    "supported: literal characters, escapes \\d \\w \\s \\D \\W \\S \\n \\t \\r \\f \\v \\xHH "
    "\\uXXXX and escaped punctuation, '.', classes [...] and [^...], groups (...) and (?:...), "
    "'|', quantifiers * + ? {n} {n,} {,m} {n,m}, '^' at the start and '$' at the end";
constexpr int kMaxGroupDepth = 256;

// Group openings that are refused, longest first, with what they are.
constexpr std::pair<std::string_view, std::string_view> kGroupExtensions[] = {
    {"(?<=", "lookbehind"}, {"(?<!", "lookbehind"},    {"(?=", "lookahead"},
    {"(?!", "lookahead"},   {"(?P=", "backreference"}, {"(?P<", "named group"},
    {"(?<", "named group"}, {"(?#", "comment group"}};

struct Bounds {
  int64_t min;
  std::optional<int64_t> max;
};

bool is_ascii_alphanumeric(char c) {
  return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
}

class RegexParser {
 public:
  RegexParser(RuleSet& rules, std::string_view pattern) : rules_(rules), pattern_(pattern) {}

  Rule parse() {
    if (!at_end() && peek() == '^') ++pos_;
    const Rule rule = alternation();
    if (!at_end()) error("unbalanced ')'", pos_);
    return rule;
  }

 private:
  bool at_end() const { return pos_ >= pattern_.size(); }
  char peek() const { return pattern_[pos_]; }

  [[noreturn]] void error(const std::string& what, size_t at, const std::string& construct = "") {
    throw GrammarError(
        "regex: " + what + " (at byte " + std::to_string(at) + "); " + std::string(kSubset),
        construct);
  }
  [[noreturn]] void refuse(std::string_view name, std::string_view construct, size_t at) {
    error(std::string(name) + " '" + std::string(construct) + "' is not supported", at,
          std::string(construct));
  }

  Rule alternation() {
    std::vector<Rule> branches = {concatenation()};
    while (!at_end() && peek() == '|') {
      ++pos_;
      branches.push_back(concatenation());
    }
    return rules_.choice(std::move(branches));
  }

  Rule concatenation() {
    std::vector<Rule> parts;
    while (!at_end() && peek() != '|' && peek() != ')') parts.push_back(quantified(atom()));
    return rules_.sequence(std::move(parts));
  }

  Rule quantified(Rule atom) {
    const size_t at = pos_;
    const std::optional<Bounds> bounds = quantifier();
    if (!bounds) return atom;
    const std::string_view written = pattern_.substr(at, pos_ + 1 - at);
    if (!at_end() && peek() == '?') refuse("lazy quantifier", written, at);
    if (!at_end() && peek() == '+') refuse("possessive quantifier", written, at);
    if (!at_end() && (peek() == '*' || counted_quantifier_at(pos_))) error("multiple repeat", pos_);
    return rules_.repeat(atom, bounds->min, bounds->max);
  }

  // Consumes a quantifier at pos_, if there is one.
  std::optional<Bounds> quantifier() {
    if (at_end()) return std::nullopt;
    const char c = peek();
    if (c == '*' || c == '+' || c == '?') {
      ++pos_;
      return c == '*' ? Bounds{0, std::nullopt} : c == '+' ? Bounds{1, std::nullopt} : Bounds{0, 1};
    }
    const std::optional<std::pair<Bounds, size_t>> counted = counted_quantifier_at(pos_);
    if (!counted) return std::nullopt;
    pos_ = counted->second;
    return counted->first;
  }

  // {n} {n,} {,m} {n,m} at `at`, and where it ends; nullopt when the '{' is a literal.
  std::optional<std::pair<Bounds, size_t>> counted_quantifier_at(size_t at) {
    if (at >= pattern_.size() || pattern_[at] != '{') return std::nullopt;
    size_t p = at + 1;
    const auto number = [&]() -> std::optional<int64_t> {
      const size_t begin = p;
      while (p < pattern_.size() && pattern_[p] >= '0' && pattern_[p] <= '9') ++p;
      if (p == begin) return std::nullopt;
      if (p - begin > 5 ||
          std::stoll(std::string(pattern_.substr(begin, p - begin))) > kMaxRepeatCount)
        error("repetition count above " + std::to_string(kMaxRepeatCount), begin);
      return std::stoll(std::string(pattern_.substr(begin, p - begin)));
    };
    const std::optional<int64_t> min = number();
    const bool comma = p < pattern_.size() && pattern_[p] == ',';
    const std::optional<int64_t> max = comma ? (++p, number()) : min;
    if (p >= pattern_.size() || pattern_[p] != '}' || (!min && !max)) return std::nullopt;
    if (max && *max < min.value_or(0)) error("repetition {n,m} with m below n", at);
    return std::pair(Bounds{min.value_or(0), max}, p + 1);
  }

  Rule atom() {
    const size_t at = pos_;
    switch (peek()) {
      case '(':
        return group();
      case '[':
        return character_class();
      case '.':
        ++pos_;
        return code_point_rule(rules_, {{0, '\n' - 1}, {'\n' + 1, kMaxCodePoint}});
      case '\\':
        return escape();
      case '*':
      case '+':
      case '?':
        error("nothing to repeat", at);
      case '^':
        refuse("anchor (only as the first character)", "^", at);
      case '$':
        if (at + 1 != pattern_.size()) refuse("anchor (only as the last character)", "$", at);
        ++pos_;
        return rules_.empty();
      default:
        if (counted_quantifier_at(at)) error("nothing to repeat", at);
        return rules_.literal(utf8_encode(code_point()));
    }
  }

  char32_t code_point() {
    const size_t at = pos_;
    const std::optional<char32_t> c = utf8_decode(pattern_, pos_);
    if (!c) error("invalid UTF-8", at);
    return *c;
  }

  Rule group() {
    const size_t at = pos_++;
    if (!at_end() && peek() == '?') {
      if (pos_ + 1 >= pattern_.size() || pattern_[pos_ + 1] != ':') refuse_group_extension(at);
      pos_ += 2;
    }
    if (++depth_ > kMaxGroupDepth)
      error("groups nested deeper than " + std::to_string(kMaxGroupDepth), at);
    const Rule inner = alternation();
    --depth_;
    if (at_end()) error("missing ')'", at);
    ++pos_;
    return inner;
  }

  [[noreturn]] void refuse_group_extension(size_t at) {
    const std::string_view rest = pattern_.substr(at);
    for (const auto& [opening, name] : kGroupExtensions) {
      if (rest.starts_with(opening)) refuse(name, opening, at);
    }
    refuse("inline flags", rest.substr(0, 3), at);
  }

  // \d \w \s \D \W \S at pos_ (after the backslash): consumes it and returns its code points.
  std::optional<std::vector<CodePointRange>> class_escape() {
    const char c = peek();
    std::vector<CodePointRange> ranges;
    if (c == 'd' || c == 'D') {
      ranges = {{'0', '9'}};
    } else if (c == 'w' || c == 'W') {
      ranges = {{'0', '9'}, {'A', 'Z'}, {'_', '_'}, {'a', 'z'}};
    } else if (c == 's' || c == 'S') {
      ranges = {{'\t', '\r'}, {' ', ' '}};  // \t \n \v \f \r and space
    } else {
      return std::nullopt;
    }
    ++pos_;
    return c >= 'a' ? ranges : complement(ranges);
  }

  // The character of a one-character escape at pos_ (after the backslash at `at`); refuses the
  // escapes that are not characters.
  char32_t escaped_character(size_t at, bool in_class) {
    const char c = peek();
    const std::string written = {'\\', c};
    if (c == 'x' || c == 'u') return hex_escape(at);
    ++pos_;
    switch (c) {
      case 'n':
        return '\n';
      case 't':
        return '\t';
      case 'r':
        return '\r';
      case 'f':
        return '\f';
      case 'v':
        return '\v';
      case 'b':
        if (in_class) return '\b';
        refuse("anchor", written, at);
      case 'B':
      case 'A':
      case 'Z':
      case 'z':
      case 'G':
        refuse("anchor", written, at);
      case 'k':
        refuse("backreference", written, at);
      case 'p':
      case 'P':
        refuse("Unicode property class", written, at);
      default:
        break;
    }
    if (c >= '1' && c <= '9') refuse("backreference", written, at);
    if (is_ascii_alphanumeric(c)) refuse("unknown escape", written, at);
    --pos_;
    return code_point();  // escaped punctuation or any non-ASCII character: itself
  }

  // \xHH or \uXXXX at pos_ (the letter).
  char32_t hex_escape(size_t at) {
    const size_t digits = peek() == 'x' ? 2 : 4;
    ++pos_;
    char32_t value = 0;
    for (size_t i = 0; i < digits; ++i, ++pos_) {
      const char c = at_end() ? ' ' : peek();
      const int digit = c >= '0' && c <= '9'   ? c - '0'
                        : c >= 'a' && c <= 'f' ? c - 'a' + 10
                        : c >= 'A' && c <= 'F' ? c - 'A' + 10
                                               : -1;
      if (digit < 0) error("escape needs " + std::to_string(digits) + " hex digits", at);
      value = value * 16 + static_cast<char32_t>(digit);
    }
    if (value >= 0xD800 && value <= 0xDFFF) error("escape of a surrogate", at);
    return value;
  }

  Rule escape() {
    const size_t at = pos_++;
    if (at_end()) error("trailing backslash", at);
    if (const auto ranges = class_escape()) return code_point_rule(rules_, *ranges);
    return rules_.literal(utf8_encode(escaped_character(at, false)));
  }

  // One member of a class at pos_: a character, or the code points of a class escape.
  struct ClassMember {
    std::vector<CodePointRange> ranges;
    bool is_character;
  };
  ClassMember class_member() {
    if (peek() != '\\') {
      const char32_t c = code_point();
      return {{{c, c}}, true};
    }
    const size_t at = pos_++;
    if (at_end()) error("trailing backslash", at);
    if (auto ranges = class_escape()) return {std::move(*ranges), false};
    const char32_t c = escaped_character(at, true);
    return {{{c, c}}, true};
  }

  Rule character_class() {
    const size_t at = pos_++;
    const bool negated = !at_end() && peek() == '^';
    if (negated) ++pos_;
    std::vector<CodePointRange> ranges;
    for (bool first = true;; first = false) {
      if (at_end()) error("missing ']'", at);
      if (peek() == ']' && !first) break;
      ClassMember member = class_member();
      const bool is_range = member.is_character && pos_ + 1 < pattern_.size() && peek() == '-' &&
                            pattern_[pos_ + 1] != ']';
      if (!is_range) {
        ranges.insert(ranges.end(), member.ranges.begin(), member.ranges.end());
        continue;
      }
      const size_t last_at = ++pos_;
      const ClassMember last = class_member();
      if (!last.is_character) error("a class escape cannot end a range", last_at);
      if (last.ranges[0].first < member.ranges[0].first) error("range out of order", last_at);
      ranges.push_back({member.ranges[0].first, last.ranges[0].first});
    }
    ++pos_;
    if (negated) ranges = complement(std::move(ranges));
    if (utf8_sequences(ranges).empty()) error("class matches no character", at);
    return code_point_rule(rules_, ranges);
  }

  RuleSet& rules_;
  std::string_view pattern_;
  size_t pos_ = 0;
  int depth_ = 0;
};

}  // namespace

RuleSet::Rule compile_regex(RuleSet& rules, std::string_view pattern) {
  return RegexParser(rules, pattern).parse();
}

}  // namespace mlaserve::grammar
