#include "server/token_text.h"

#include <fmt/format.h>

#include "tokenizer/utf8.h"

namespace mlaserve::server {

std::string token_display_text(const tokenizer::Tokenizer& tokenizer, int32_t id) {
  const std::string_view bytes = tokenizer.id_to_bytes(id);
  if (!tokenizer::utf8::first_invalid_offset(bytes)) return std::string(bytes);
  std::string escaped = "bytes:";
  for (const char byte : bytes) escaped += fmt::format("\\x{:02x}", static_cast<uint8_t>(byte));
  return escaped;
}

nlohmann::json token_bytes(const tokenizer::Tokenizer& tokenizer, int32_t id) {
  nlohmann::json bytes = nlohmann::json::array();
  for (const char byte : tokenizer.id_to_bytes(id)) bytes.push_back(static_cast<uint8_t>(byte));
  return bytes;
}

}  // namespace mlaserve::server
