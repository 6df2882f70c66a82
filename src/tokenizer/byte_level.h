// GPT-2's reversible map between bytes and printable characters, which byte-level BPE vocabularies
// are written in (e.g. byte 0x20, the space, is "Ġ").
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace mlaserve::tokenizer::byte_level {

char32_t byte_to_char(uint8_t byte);
std::optional<uint8_t> char_to_byte(char32_t code_point);

// The vocabulary spelling of raw bytes: each byte becomes its mapped character, in UTF-8.
std::string bytes_to_symbols(std::string_view bytes);

// The ByteLevel decoder's rule for one token: if every character of `token` is a mapped
// character, the bytes they stand for; otherwise (e.g. an added token such as "<｜User｜>")
// the token's own UTF-8 text. `token` must be well-formed UTF-8.
std::string symbols_to_bytes(std::string_view token);

}  // namespace mlaserve::tokenizer::byte_level
