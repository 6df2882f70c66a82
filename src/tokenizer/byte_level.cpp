#include "tokenizer/byte_level.h"

#include <array>

#include "tokenizer/utf8.h"

namespace mlaserve::tokenizer::byte_level {
namespace {

// Printable bytes keep their own code point; the other 68 bytes take 256, 257, ... in byte order.
constexpr bool is_printable(unsigned byte) {
  return (byte >= '!' && byte <= '~') || (byte >= 0xA1 && byte <= 0xAC) || byte >= 0xAE;
}

struct ByteMap {
  std::array<char32_t, 256> to_char{};
  std::array<int16_t, 324> from_char{};  // every mapped code point is below 256 + 68

  ByteMap() {
    from_char.fill(-1);
    char32_t next_unprintable = 256;
    for (unsigned byte = 0; byte < 256; ++byte) {
      to_char[byte] = is_printable(byte) ? byte : next_unprintable++;
      from_char[to_char[byte]] = static_cast<int16_t>(byte);
    }
  }
};

const ByteMap& byte_map() {
  static const ByteMap map;
  return map;
}

}  // namespace

char32_t byte_to_char(uint8_t byte) {
  return byte_map().to_char[byte];
}

std::optional<uint8_t> char_to_byte(char32_t code_point) {
  const auto& from_char = byte_map().from_char;
  if (code_point >= from_char.size() || from_char[code_point] < 0) return std::nullopt;
  return static_cast<uint8_t>(from_char[code_point]);
}

std::string bytes_to_symbols(std::string_view bytes) {
  std::string symbols;
  symbols.reserve(bytes.size() * 2);
  for (const char byte : bytes) {
    utf8::append_code_point(symbols, byte_to_char(static_cast<uint8_t>(byte)));
  }
  return symbols;
}

std::string symbols_to_bytes(std::string_view token) {
  std::string bytes;
  bytes.reserve(token.size());
  size_t pos = 0;
  while (pos < token.size()) {
    const std::optional<uint8_t> byte = char_to_byte(utf8::decode_next(token, pos));
    if (!byte) return std::string(token);
    bytes.push_back(static_cast<char>(*byte));
  }
  return bytes;
}

}  // namespace mlaserve::tokenizer::byte_level
