// Added tokens (tokenizer.json "added_tokens"): literal strings that are cut out of the input
// before pre-tokenization and map straight to one id each.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace mlaserve::tokenizer {

struct AddedToken {
  int32_t id = 0;
  std::string content;
  bool special = false;     // dropped by decode(skip_special_tokens=true)
  bool lstrip = false;      // the match swallows whitespace on its left
  bool rstrip = false;      // ... and on its right
  bool normalized = false;  // matched in normalized text rather than raw text
};

// A stretch of input: ordinary text, or the text an added token matched (id set).
struct TextSegment {
  std::string_view text;
  std::optional<int32_t> added_token_id;
};

// Finds a set of added tokens leftmost-longest, as HF's AddedVocabulary does: the earliest
// position where any token matches wins, and there the longest token.
class AddedTokenMatcher {
 public:
  explicit AddedTokenMatcher(std::vector<AddedToken> tokens);

  // Appends the segments of `text` to `segments`: ordinary text between the matches (never empty)
  // and one segment per match.
  void split(std::string_view text, std::vector<TextSegment>& segments) const;

 private:
  struct TrieNode {
    std::vector<std::pair<uint8_t, uint32_t>> children;  // byte -> node index
    int32_t token = -1;                                  // index in tokens_ of a token ending here
  };
  struct TokenMatch {
    const AddedToken* token = nullptr;
    size_t length = 0;
  };

  void insert(int32_t token_index);
  TokenMatch longest_match_at(std::string_view text, size_t pos) const;

  std::vector<AddedToken> tokens_;
  std::vector<TrieNode> nodes_;
  std::array<bool, 256> can_start_{};  // quick filter: bytes that begin some token
};

}  // namespace mlaserve::tokenizer
