#include "tokenizer/jinja_strings.h"

#include "tokenizer/utf8.h"

namespace mlaserve::tokenizer::jinja {
namespace {

// Python's str.isspace also counts the information separators U+001C..U+001F.
bool python_isspace(char32_t c) {
  return utf8::is_whitespace(c) || (c >= 0x1C && c <= 0x1F);
}

// Start of the next whitespace run at or after `pos`, or text.size().
size_t next_space(const std::u32string& text, size_t pos) {
  while (pos < text.size() && !python_isspace(text[pos])) ++pos;
  return pos;
}

size_t next_non_space(const std::u32string& text, size_t pos) {
  while (pos < text.size() && python_isspace(text[pos])) ++pos;
  return pos;
}

std::vector<std::string> split_on_whitespace(std::string_view text, int64_t max_split) {
  const std::u32string chars = to_code_points(text);
  std::vector<std::string> parts;
  size_t pos = next_non_space(chars, 0);
  while (pos < chars.size()) {
    if (max_split >= 0 && static_cast<int64_t>(parts.size()) == max_split) {
      // The rest, with trailing whitespace removed, is the last part.
      size_t end = chars.size();
      while (end > pos && python_isspace(chars[end - 1])) --end;
      parts.push_back(to_utf8(std::u32string_view(chars).substr(pos, end - pos)));
      break;
    }
    const size_t end = next_space(chars, pos);
    parts.push_back(to_utf8(std::u32string_view(chars).substr(pos, end - pos)));
    pos = next_non_space(chars, end);
  }
  return parts;
}

}  // namespace

std::u32string to_code_points(std::string_view text) {
  std::u32string out;
  for (size_t pos = 0; pos < text.size();) out.push_back(utf8::decode_next(text, pos));
  return out;
}

std::string to_utf8(std::u32string_view code_points) {
  std::string out;
  for (const char32_t c : code_points) utf8::append_code_point(out, c);
  return out;
}

std::string python_strip(std::string_view text, const std::optional<std::string>& chars, bool left,
                         bool right) {
  const std::u32string content = to_code_points(text);
  const std::u32string strip_set = chars ? to_code_points(*chars) : std::u32string();
  auto strips = [&](char32_t c) {
    return chars ? strip_set.find(c) != std::u32string::npos : python_isspace(c);
  };
  size_t begin = 0;
  size_t end = content.size();
  while (left && begin < end && strips(content[begin])) ++begin;
  while (right && end > begin && strips(content[end - 1])) --end;
  return to_utf8(std::u32string_view(content).substr(begin, end - begin));
}

std::vector<std::string> python_split(std::string_view text,
                                      const std::optional<std::string>& separator,
                                      int64_t max_split) {
  if (!separator) return split_on_whitespace(text, max_split);
  std::vector<std::string> parts;
  size_t pos = 0;
  while (max_split < 0 || static_cast<int64_t>(parts.size()) < max_split) {
    const size_t found = text.find(*separator, pos);
    if (found == std::string_view::npos) break;
    parts.emplace_back(text.substr(pos, found - pos));
    pos = found + separator->size();
  }
  parts.emplace_back(text.substr(pos));
  return parts;
}

std::string python_replace(std::string_view text, std::string_view old_text,
                           std::string_view new_text, int64_t max_count) {
  std::string out;
  size_t pos = 0;
  int64_t replaced = 0;
  while (max_count < 0 || replaced < max_count) {
    // Python inserts new_text between all characters when old_text is empty.
    const size_t found = old_text.empty() ? pos : text.find(old_text, pos);
    if (found == std::string_view::npos || found > text.size()) break;
    out.append(text.substr(pos, found - pos)).append(new_text);
    ++replaced;
    if (old_text.empty()) {
      if (found == text.size()) return out;
      size_t next = found;
      utf8::decode_next(text, next);
      out.append(text.substr(found, next - found));
      pos = next;
    } else {
      pos = found + old_text.size();
    }
  }
  return out.append(text.substr(pos));
}

std::string ascii_lower(std::string_view text) {
  std::string out(text);
  for (char& c : out) {
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  }
  return out;
}

std::string ascii_upper(std::string_view text) {
  std::string out(text);
  for (char& c : out) {
    if (c >= 'a' && c <= 'z') c = static_cast<char>(c - 'a' + 'A');
  }
  return out;
}

}  // namespace mlaserve::tokenizer::jinja
