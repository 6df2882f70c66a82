#include "tokenizer/tiktoken_model.h"

#include <array>
#include <charconv>
#include <unordered_map>

#include "core/error.h"

namespace mlaserve::tokenizer {
namespace {

constexpr std::string_view kAlphabet =
    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

constexpr std::array<int8_t, 256> make_sextet_table() {
  std::array<int8_t, 256> table{};
  table.fill(-1);
  for (size_t i = 0; i < kAlphabet.size(); ++i) {
    table[static_cast<uint8_t>(kAlphabet[i])] = static_cast<int8_t>(i);
  }
  return table;
}

constexpr std::array<int8_t, 256> kSextet = make_sextet_table();

// The line's token and rank; the Error says what is wrong, the caller adds where.
RankedToken parse_line(std::string_view line) {
  const size_t space = line.find(' ');
  if (space == std::string_view::npos || line.find(' ', space + 1) != std::string_view::npos) {
    fail("expected 'BASE64 RANK' (one space), got '{}'", line.substr(0, 80));
  }
  RankedToken token{{}, 0};
  if (!decode_base64(line.substr(0, space), token.bytes)) {
    fail("'{}' is not valid base64", line.substr(0, std::min<size_t>(space, 80)));
  }
  if (token.bytes.empty()) fail("the token is empty");
  const std::string_view rank = line.substr(space + 1);
  const auto [end, error] = std::from_chars(rank.data(), rank.data() + rank.size(), token.rank);
  if (rank.empty() || error != std::errc() || end != rank.data() + rank.size() || token.rank < 0 ||
      token.rank > kMaxTiktokenRank) {
    fail("rank '{}' is not an integer from 0 to {}", rank.substr(0, 40), kMaxTiktokenRank);
  }
  return token;
}

}  // namespace

bool decode_base64(std::string_view encoded, std::string& bytes) {
  bytes.clear();
  if (encoded.size() % 4 != 0) return false;
  const size_t padding = encoded.ends_with("==") ? 2 : encoded.ends_with('=') ? 1 : 0;
  uint32_t bits = 0;
  int bit_count = 0;
  for (const char c : encoded.substr(0, encoded.size() - padding)) {
    const int8_t sextet = kSextet[static_cast<uint8_t>(c)];
    if (sextet < 0) return false;
    bits = (bits << 6) | static_cast<uint32_t>(sextet);
    bit_count += 6;
    if (bit_count >= 8) {
      bit_count -= 8;
      bytes += static_cast<char>((bits >> bit_count) & 0xFF);
      bits &= (1u << bit_count) - 1;
    }
  }
  // The bits left under the padding are dropped, as Python's base64 module (which tiktoken's
  // loader uses) drops them.
  return true;
}

std::vector<RankedToken> parse_tiktoken_model(std::string_view text, std::string_view file_name) {
  std::vector<RankedToken> tokens;
  std::unordered_map<int32_t, size_t> line_of_rank;
  std::unordered_map<std::string, size_t> line_of_token;
  size_t line_number = 0;
  for (size_t begin = 0; begin < text.size();) {
    const size_t newline = text.find('\n', begin);
    const size_t end = newline == std::string_view::npos ? text.size() : newline;
    const std::string_view line = text.substr(begin, end - begin);
    begin = end + 1;
    ++line_number;
    try {
      RankedToken token = parse_line(line);
      if (const auto [it, added] = line_of_rank.emplace(token.rank, line_number); !added) {
        fail("rank {} is repeated (first on line {})", token.rank, it->second);
      }
      if (const auto [it, added] = line_of_token.emplace(token.bytes, line_number); !added) {
        fail("the token is repeated (first on line {})", it->second);
      }
      tokens.push_back(std::move(token));
    } catch (const Error& e) {
      fail("{} line {}: {}", file_name, line_number, e.what());
    }
  }
  return tokens;
}

}  // namespace mlaserve::tokenizer
