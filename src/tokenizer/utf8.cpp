#include "tokenizer/utf8.h"

#include <cstdint>

namespace mlaserve::tokenizer::utf8 {
namespace {

constexpr char32_t kReplacement = 0xFFFD;

// A lead byte's sequence length and the range its second byte must lie in (Unicode table 3-7);
// the other continuation bytes are always 0x80..0xBF.
struct LeadByte {
  size_t length = 0;  // 0: the byte cannot start a character
  uint8_t second_min = 0x80;
  uint8_t second_max = 0xBF;
};

LeadByte classify_lead(uint8_t byte) {
  if (byte < 0x80) return {1};
  if (byte >= 0xC2 && byte <= 0xDF) return {2};
  if (byte == 0xE0) return {3, 0xA0, 0xBF};
  if (byte == 0xED) return {3, 0x80, 0x9F};
  if (byte >= 0xE1 && byte <= 0xEF) return {3};
  if (byte == 0xF0) return {4, 0x90, 0xBF};
  if (byte >= 0xF1 && byte <= 0xF3) return {4};
  if (byte == 0xF4) return {4, 0x80, 0x8F};
  return {};
}

// How much of the character starting at `pos` is well formed: `length` bytes, `complete` when
// they make a whole character. length 0 means the byte at `pos` cannot start a character.
struct SequenceScan {
  size_t length;
  bool complete;
};

SequenceScan scan_sequence(std::string_view bytes, size_t pos) {
  const LeadByte lead = classify_lead(static_cast<uint8_t>(bytes[pos]));
  if (lead.length == 0) return {0, false};
  size_t matched = 1;
  while (matched < lead.length && pos + matched < bytes.size()) {
    const auto byte = static_cast<uint8_t>(bytes[pos + matched]);
    const uint8_t min = matched == 1 ? lead.second_min : 0x80;
    const uint8_t max = matched == 1 ? lead.second_max : 0xBF;
    if (byte < min || byte > max) break;
    ++matched;
  }
  return {matched, matched == lead.length};
}

}  // namespace

std::optional<size_t> first_invalid_offset(std::string_view bytes) {
  size_t pos = 0;
  while (pos < bytes.size()) {
    const SequenceScan scan = scan_sequence(bytes, pos);
    if (!scan.complete) return pos;
    pos += scan.length;
  }
  return std::nullopt;
}

void append_lossy(std::string& out, std::string_view bytes) {
  size_t pos = 0;
  while (pos < bytes.size()) {
    const SequenceScan scan = scan_sequence(bytes, pos);
    if (scan.complete) {
      out.append(bytes.substr(pos, scan.length));
    } else {
      append_code_point(out, kReplacement);
    }
    pos += scan.length == 0 ? 1 : scan.length;
  }
}

size_t incomplete_tail_length(std::string_view bytes) {
  // A lead byte is never a continuation byte, so a well-formed prefix that starts at a lead byte
  // and runs to the end is exactly what a lossy decoder would still be waiting on.
  for (size_t tail = 3; tail >= 1; --tail) {
    if (tail > bytes.size()) continue;
    const size_t pos = bytes.size() - tail;
    const SequenceScan scan = scan_sequence(bytes, pos);
    if (!scan.complete && scan.length == tail) return tail;
  }
  return 0;
}

void append_code_point(std::string& out, char32_t cp) {
  if (cp < 0x80) {
    out.push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out.push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out.push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out.push_back(static_cast<char>(0xF0 | (cp >> 18)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

char32_t decode_next(std::string_view text, size_t& pos) {
  const auto lead = static_cast<uint8_t>(text[pos]);
  const size_t length = classify_lead(lead).length;
  static constexpr uint8_t kLeadMask[] = {0, 0x7F, 0x1F, 0x0F, 0x07};
  char32_t cp = lead & kLeadMask[length];
  for (size_t i = 1; i < length; ++i) cp = (cp << 6) | (static_cast<uint8_t>(text[pos + i]) & 0x3F);
  pos += length;
  return cp;
}

size_t count_code_points(std::string_view text) {
  size_t count = 0;
  for (const char c : text) count += (static_cast<uint8_t>(c) & 0xC0) != 0x80;
  return count;
}

bool is_whitespace(char32_t cp) {
  return (cp >= 0x09 && cp <= 0x0D) || cp == 0x20 || cp == 0x85 || cp == 0xA0 || cp == 0x1680 ||
         (cp >= 0x2000 && cp <= 0x200A) || cp == 0x2028 || cp == 0x2029 || cp == 0x202F ||
         cp == 0x205F || cp == 0x3000;
}

}  // namespace mlaserve::tokenizer::utf8
