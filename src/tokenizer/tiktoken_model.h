// tiktoken's vocabulary file (`tiktoken.model`, as Kimi-K2 ships it): one `BASE64 RANK` line per
// token, the token's raw bytes in base64 and its merge rank, which is also its id.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace mlaserve::tokenizer {

// The largest rank accepted: ids index dense tables, so a stray huge rank would allocate them.
inline constexpr int32_t kMaxTiktokenRank = (1 << 22) - 1;

struct RankedToken {
  std::string bytes;  // raw bytes, possibly part of a UTF-8 character
  int32_t rank;
};

// Parses the file's text, in file order. A malformed line (not `BASE64 SPACE INTEGER`, invalid
// base64, an empty token, a rank outside 0..kMaxTiktokenRank), a repeated rank or a repeated token
// is an mlaserve::Error naming `file_name` and the line number. A final empty line is allowed.
std::vector<RankedToken> parse_tiktoken_model(std::string_view text, std::string_view file_name);

// Decodes standard base64 (RFC 4648 alphabet, '=' padding to a multiple of 4) into `bytes`;
// false if `encoded` is not base64.
bool decode_base64(std::string_view encoded, std::string& bytes);

}  // namespace mlaserve::tokenizer
