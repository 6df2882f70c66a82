#include "tokenizer/jinja_lexer.h"

#include <algorithm>
#include <array>
#include <cctype>

#include "tokenizer/jinja_value.h"
#include "tokenizer/utf8.h"

namespace mlaserve::tokenizer::jinja {
namespace {

bool is_space(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r';
}
bool is_name_start(char c) {
  return std::isalpha(static_cast<unsigned char>(c)) || c == '_';
}
bool is_name_char(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) || c == '_';
}
bool is_digit(char c) {
  return c >= '0' && c <= '9';
}

std::string_view strip_trailing_space(std::string_view text) {
  while (!text.empty() && is_space(text.back())) text.remove_suffix(1);
  return text;
}

enum class TagKind { kBlock, kOutput, kComment };

// The lexer walks the source once; between tags it collects text, inside tags expression tokens.
class Lexer {
 public:
  explicit Lexer(std::string_view source) : source_(source) {}

  std::vector<Token> run() {
    while (true) {
      const size_t tag = find_tag(pos_);
      emit_text(tag);
      if (tag == std::string_view::npos) break;
      lex_tag(tag);
    }
    tokens_.push_back({TokenKind::kEnd, "", line_});
    return std::move(tokens_);
  }

 private:
  size_t find_tag(size_t from) const {
    size_t at = source_.find('{', from);
    while (at != std::string_view::npos && at + 1 < source_.size()) {
      const char next = source_[at + 1];
      if (next == '{' || next == '%' || next == '#') return at;
      at = source_.find('{', at + 1);
    }
    return std::string_view::npos;
  }

  static TagKind tag_kind(char second) {
    return second == '{' ? TagKind::kOutput : second == '%' ? TagKind::kBlock : TagKind::kComment;
  }

  // Emits the text from pos_ to `tag`, trimmed as the neighbouring tags ask.
  void emit_text(size_t tag) {
    const size_t end = tag == std::string_view::npos ? source_.size() : tag;
    std::string_view text = source_.substr(pos_, end - pos_);
    const int text_line = line_;
    count_lines(text);
    if (strip_text_start_) {
      while (!text.empty() && is_space(text.front())) text.remove_prefix(1);
    }
    if (tag != std::string_view::npos) text = trim_before_tag(text, tag);
    if (!text.empty()) tokens_.push_back({TokenKind::kText, std::string(text), text_line});
    pos_ = end;
  }

  std::string_view trim_before_tag(std::string_view text, size_t tag) const {
    const char control = tag + 2 < source_.size() ? source_[tag + 2] : '\0';
    if (control == '-') return strip_trailing_space(text);
    if (tag_kind(source_[tag + 1]) == TagKind::kOutput || control == '+') return text;
    // lstrip_blocks: only spaces and tabs between the line start and the tag go.
    const size_t newline = text.rfind('\n');
    const size_t line_start = newline == std::string_view::npos ? 0 : newline + 1;
    if (newline == std::string_view::npos && !line_starting_) return text;
    const std::string_view indent = text.substr(line_start);
    const bool blank =
        std::all_of(indent.begin(), indent.end(), [](char c) { return c == ' ' || c == '\t'; });
    return blank ? text.substr(0, line_start) : text;
  }

  void lex_tag(size_t tag) {
    const TagKind kind = tag_kind(source_[tag + 1]);
    pos_ = tag + 2;
    if (pos_ < source_.size() && (source_[pos_] == '-' || source_[pos_] == '+')) ++pos_;
    if (kind == TagKind::kComment) {
      skip_comment(tag);
    } else {
      tokens_.push_back(
          {kind == TagKind::kBlock ? TokenKind::kBlockBegin : TokenKind::kOutputBegin, "", line_});
      lex_expression_tokens(kind, tag);
    }
  }

  void skip_comment(size_t tag) {
    const size_t close = source_.find("#}", pos_);
    if (close == std::string_view::npos) fail_at(line_of(tag), "comment is never closed with #}}");
    count_lines(source_.substr(pos_, close - pos_));
    const char control = source_[close - 1];
    pos_ = close + 2;
    after_tag_end(control, /*trim_newline=*/true);
  }

  // After a tag: `-` strips the whitespace that follows, otherwise trim_blocks drops one newline.
  void after_tag_end(char control, bool trim_newline) {
    strip_text_start_ = control == '-';
    line_starting_ = false;
    if (strip_text_start_) {
      size_t end = pos_;
      while (end < source_.size() && is_space(source_[end])) ++end;
      line_starting_ = end > pos_ && source_[end - 1] == '\n';
    } else if (trim_newline && control != '+' && pos_ < source_.size() && source_[pos_] == '\n') {
      ++pos_;
      ++line_;
      line_starting_ = true;
    }
  }

  void lex_expression_tokens(TagKind kind, size_t tag) {
    const char closer = kind == TagKind::kBlock ? '%' : '}';
    int depth = 0;  // open brackets, so that "}}" inside a dict literal does not end the tag
    while (true) {
      while (pos_ < source_.size() && is_space(source_[pos_])) {
        if (source_[pos_++] == '\n') ++line_;
      }
      if (pos_ >= source_.size()) fail_at(line_of(tag), "tag is never closed");
      if (depth == 0 && try_close(kind, closer)) return;
      lex_one_token(depth);
    }
  }

  bool try_close(TagKind kind, char closer) {
    const std::string_view rest = source_.substr(pos_);
    const bool has_control = (rest[0] == '-' || (rest[0] == '+' && kind == TagKind::kBlock));
    const std::string_view marker = rest.substr(has_control ? 1 : 0);
    if (marker.size() < 2 || marker[0] != closer || marker[1] != '}') return false;
    tokens_.push_back(
        {kind == TagKind::kBlock ? TokenKind::kBlockEnd : TokenKind::kOutputEnd, "", line_});
    pos_ += (has_control ? 3 : 2);
    after_tag_end(has_control ? rest[0] : '\0', kind == TagKind::kBlock);
    return true;
  }

  void lex_one_token(int& depth) {
    const char c = source_[pos_];
    if (is_name_start(c)) {
      const size_t start = pos_;
      while (pos_ < source_.size() && is_name_char(source_[pos_])) ++pos_;
      tokens_.push_back(
          {TokenKind::kName, std::string(source_.substr(start, pos_ - start)), line_});
    } else if (is_digit(c)) {
      lex_number();
    } else if (c == '\'' || c == '"') {
      lex_string(c);
    } else {
      lex_operator(depth);
    }
  }

  void lex_number() {
    const size_t start = pos_;
    bool is_float = false;
    while (pos_ < source_.size() && (is_digit(source_[pos_]) || source_[pos_] == '_')) ++pos_;
    if (pos_ + 1 < source_.size() && source_[pos_] == '.' && is_digit(source_[pos_ + 1])) {
      is_float = true;
      for (++pos_; pos_ < source_.size() && is_digit(source_[pos_]);) ++pos_;
    }
    if (pos_ < source_.size() && (source_[pos_] == 'e' || source_[pos_] == 'E')) {
      size_t exponent = pos_ + 1;
      if (exponent < source_.size() && (source_[exponent] == '+' || source_[exponent] == '-'))
        ++exponent;
      if (exponent < source_.size() && is_digit(source_[exponent])) {
        is_float = true;
        for (pos_ = exponent; pos_ < source_.size() && is_digit(source_[pos_]);) ++pos_;
      }
    }
    std::string text(source_.substr(start, pos_ - start));
    std::erase(text, '_');
    tokens_.push_back({is_float ? TokenKind::kFloat : TokenKind::kInteger, text, line_});
  }

  void lex_string(char quote) {
    const int start_line = line_;
    std::string value;
    ++pos_;
    while (true) {
      if (pos_ >= source_.size()) fail_at(start_line, "string literal is never closed");
      const char c = source_[pos_++];
      if (c == quote) break;
      if (c == '\n') ++line_;
      if (c == '\\' && pos_ < source_.size()) {
        append_escape(value, start_line);
      } else {
        value += c;
      }
    }
    tokens_.push_back({TokenKind::kString, std::move(value), start_line});
  }

  // Python string escapes; an unknown escape keeps its backslash, as in Python.
  void append_escape(std::string& value, int line) {
    const char c = source_[pos_++];
    switch (c) {
      case 'n':
        value += '\n';
        return;
      case 't':
        value += '\t';
        return;
      case 'r':
        value += '\r';
        return;
      case 'b':
        value += '\b';
        return;
      case 'f':
        value += '\f';
        return;
      case 'v':
        value += '\v';
        return;
      case '0':
        value += '\0';
        return;
      case '\\':
      case '\'':
      case '"':
        value += c;
        return;
      case '\n':
        ++line_;
        return;  // a backslash-newline continues the literal
      case 'x':
        append_hex_escape(value, 2, line);
        return;
      case 'u':
        append_hex_escape(value, 4, line);
        return;
      case 'U':
        append_hex_escape(value, 8, line);
        return;
      default:
        value += '\\';
        value += c;
    }
  }

  void append_hex_escape(std::string& value, size_t digits, int line) {
    const std::string_view hex = source_.substr(pos_, digits);
    if (hex.size() != digits || !std::all_of(hex.begin(), hex.end(), [](char c) {
          return std::isxdigit(static_cast<unsigned char>(c));
        })) {
      fail_at(line, "malformed \\x/\\u/\\U escape in a string literal");
    }
    const auto code_point = static_cast<char32_t>(std::stoul(std::string(hex), nullptr, 16));
    if (code_point > 0x10FFFF) fail_at(line, "escape \\U{} is beyond Unicode", hex);
    utf8::append_code_point(value, code_point);
    pos_ += digits;
  }

  void lex_operator(int& depth) {
    static constexpr std::array<std::string_view, 6> kTwoChar = {
        "==", "!=", "<=", ">=", "//", "**"};
    const std::string_view rest = source_.substr(pos_);
    for (const std::string_view op : kTwoChar) {
      if (rest.starts_with(op)) {
        tokens_.push_back({TokenKind::kOperator, std::string(op), line_});
        pos_ += 2;
        return;
      }
    }
    const char c = rest[0];
    if (std::string_view("+-*/%~<>=()[]{}.,:|").find(c) == std::string_view::npos) {
      fail_at(line_, "unexpected character '{}' in a tag", c);
    }
    if (c == '(' || c == '[' || c == '{') ++depth;
    if ((c == ')' || c == ']' || c == '}') && depth > 0) --depth;
    tokens_.push_back({TokenKind::kOperator, std::string(1, c), line_});
    ++pos_;
  }

  void count_lines(std::string_view text) {
    line_ += static_cast<int>(std::count(text.begin(), text.end(), '\n'));
  }

  int line_of(size_t offset) const {
    return 1 + static_cast<int>(std::count(source_.begin(), source_.begin() + offset, '\n'));
  }

  std::string_view source_;
  size_t pos_ = 0;
  int line_ = 1;
  bool strip_text_start_ = false;  // the previous tag ended with '-'
  bool line_starting_ = true;      // the text that follows starts a line
  std::vector<Token> tokens_;
};

}  // namespace

std::vector<Token> lex(std::string_view source) {
  // Jinja drops a single trailing newline of the template (keep_trailing_newline=False).
  if (source.ends_with("\r\n")) {
    source.remove_suffix(2);
  } else if (source.ends_with('\n')) {
    source.remove_suffix(1);
  }
  return Lexer(source).run();
}

}  // namespace mlaserve::tokenizer::jinja
