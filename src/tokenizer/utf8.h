// UTF-8 helpers for the tokenizer: validation, lossy decoding and streaming boundaries.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

namespace mlaserve::tokenizer::utf8 {

// Where the first byte that is not part of well-formed UTF-8 sits, or nullopt if all is valid.
std::optional<size_t> first_invalid_offset(std::string_view bytes);

// Appends `bytes` to `out`, replacing each maximal ill-formed subpart with U+FFFD (the Unicode
// "substitution of maximal subparts" practice that Rust's from_utf8_lossy, and so HF, follow).
void append_lossy(std::string& out, std::string_view bytes);

// How many trailing bytes form the start of a multi-byte character that later bytes could still
// complete. A streaming decoder must hold these back.
size_t incomplete_tail_length(std::string_view bytes);

void append_code_point(std::string& out, char32_t code_point);

// Decodes the character at `pos` of well-formed UTF-8 and advances `pos` past it.
char32_t decode_next(std::string_view text, size_t& pos);

// Number of code points in well-formed UTF-8.
size_t count_code_points(std::string_view text);

// The Unicode White_Space property (what Rust's char::is_whitespace and Oniguruma's \s test).
bool is_whitespace(char32_t code_point);

}  // namespace mlaserve::tokenizer::utf8
