#include "tokenizer/added_tokens.h"

#include "tokenizer/utf8.h"

namespace mlaserve::tokenizer {
namespace {

bool is_continuation_byte(char byte) {
  return (static_cast<uint8_t>(byte) & 0xC0) == 0x80;
}

// Moves `begin` left over whitespace characters, not past `floor`.
size_t extend_left_over_whitespace(std::string_view text, size_t begin, size_t floor) {
  while (begin > floor) {
    size_t char_start = begin - 1;
    while (char_start > floor && is_continuation_byte(text[char_start])) --char_start;
    size_t cursor = char_start;
    if (!utf8::is_whitespace(utf8::decode_next(text, cursor))) break;
    begin = char_start;
  }
  return begin;
}

// Moves `end` right over whitespace characters.
size_t extend_right_over_whitespace(std::string_view text, size_t end) {
  while (end < text.size()) {
    size_t cursor = end;
    if (!utf8::is_whitespace(utf8::decode_next(text, cursor))) break;
    end = cursor;
  }
  return end;
}

}  // namespace

AddedTokenMatcher::AddedTokenMatcher(std::vector<AddedToken> tokens) : tokens_(std::move(tokens)) {
  nodes_.emplace_back();
  for (size_t i = 0; i < tokens_.size(); ++i) insert(static_cast<int32_t>(i));
}

void AddedTokenMatcher::insert(int32_t token_index) {
  const AddedToken& token = tokens_[token_index];
  if (token.content.empty()) return;
  can_start_[static_cast<uint8_t>(token.content[0])] = true;
  uint32_t node = 0;
  for (const char c : token.content) {
    const auto byte = static_cast<uint8_t>(c);
    uint32_t next = 0;
    for (const auto& [child_byte, child] : nodes_[node].children) {
      if (child_byte == byte) next = child;
    }
    if (next == 0) {
      next = static_cast<uint32_t>(nodes_.size());
      nodes_[node].children.emplace_back(byte, next);
      nodes_.emplace_back();
    }
    node = next;
  }
  // Two added tokens with the same content: the first one listed keeps it.
  if (nodes_[node].token < 0) nodes_[node].token = token_index;
}

AddedTokenMatcher::TokenMatch AddedTokenMatcher::longest_match_at(std::string_view text,
                                                                  size_t pos) const {
  TokenMatch best;
  uint32_t node = 0;
  for (size_t i = pos; i < text.size(); ++i) {
    const auto byte = static_cast<uint8_t>(text[i]);
    uint32_t next = 0;
    for (const auto& [child_byte, child] : nodes_[node].children) {
      if (child_byte == byte) next = child;
    }
    if (next == 0) break;
    node = next;
    if (nodes_[node].token >= 0) best = {&tokens_[nodes_[node].token], i + 1 - pos};
  }
  return best;
}

void AddedTokenMatcher::split(std::string_view text, std::vector<TextSegment>& segments) const {
  size_t plain_begin = 0;
  size_t pos = 0;
  while (pos < text.size()) {
    if (!can_start_[static_cast<uint8_t>(text[pos])]) {
      ++pos;
      continue;
    }
    const TokenMatch match = longest_match_at(text, pos);
    if (match.token == nullptr) {
      ++pos;
      continue;
    }
    size_t begin = pos;
    size_t end = pos + match.length;
    if (match.token->lstrip) begin = extend_left_over_whitespace(text, begin, plain_begin);
    if (match.token->rstrip) end = extend_right_over_whitespace(text, end);
    if (begin > plain_begin)
      segments.push_back({text.substr(plain_begin, begin - plain_begin), std::nullopt});
    segments.push_back({text.substr(begin, end - begin), match.token->id});
    plain_begin = pos = end;
  }
  if (plain_begin < text.size()) segments.push_back({text.substr(plain_begin), std::nullopt});
}

}  // namespace mlaserve::tokenizer
