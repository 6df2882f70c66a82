// Python str operations on UTF-8 text, by code point, for the template builtins.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace mlaserve::tokenizer::jinja {

std::u32string to_code_points(std::string_view text);
std::string to_utf8(std::u32string_view code_points);

// str.strip/lstrip/rstrip: removes the characters in `chars`, or whitespace when nullopt.
std::string python_strip(std::string_view text, const std::optional<std::string>& chars, bool left,
                         bool right);

// str.split(separator, max_split): by whitespace runs when separator is nullopt; max_split < 0
// means no limit. The separator must not be empty.
std::vector<std::string> python_split(std::string_view text,
                                      const std::optional<std::string>& separator,
                                      int64_t max_split);

std::string python_replace(std::string_view text, std::string_view old_text,
                           std::string_view new_text, int64_t max_count);

// Case mapping of ASCII letters only; other characters are kept as they are.
std::string ascii_lower(std::string_view text);
std::string ascii_upper(std::string_view text);

}  // namespace mlaserve::tokenizer::jinja
