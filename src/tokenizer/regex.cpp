#define PCRE2_CODE_UNIT_WIDTH 8
#include "tokenizer/regex.h"

#include <pcre2.h>

#include "core/error.h"
#include "tokenizer/utf8.h"

namespace mlaserve::tokenizer {
namespace {

std::string pcre2_message(int error_code) {
  PCRE2_UCHAR buffer[256];
  pcre2_get_error_message(error_code, buffer, sizeof(buffer));
  return reinterpret_cast<const char*>(buffer);
}

// Match data and a JIT stack per thread, so that const Regex objects can be shared by threads.
// The default 32 KiB JIT stack is too small for long whitespace runs under \s+(?!\S).
struct MatchScratch {
  pcre2_match_data* data = pcre2_match_data_create(1, nullptr);
  pcre2_jit_stack* stack = pcre2_jit_stack_create(32 * 1024, 64 * 1024 * 1024, nullptr);
  pcre2_match_context* context = pcre2_match_context_create(nullptr);

  MatchScratch() { pcre2_jit_stack_assign(context, nullptr, stack); }
  ~MatchScratch() {
    pcre2_match_context_free(context);
    pcre2_jit_stack_free(stack);
    pcre2_match_data_free(data);
  }
  MatchScratch(const MatchScratch&) = delete;
  MatchScratch& operator=(const MatchScratch&) = delete;
};

MatchScratch& match_scratch() {
  thread_local MatchScratch scratch;
  return scratch;
}

constexpr std::string_view kWordClassBody = "\\p{L}\\p{M}\\p{Nd}\\p{Pc}";

// Translates the escape `letter` (the character after a backslash); false if it needs no change.
bool translate_escape(char letter, bool in_class, std::string_view pattern, std::string& out) {
  switch (letter) {
    case 's':
      out += "\\p{White_Space}";
      return true;
    case 'S':
      out += "\\P{White_Space}";
      return true;
    case 'w':
      out += in_class ? std::string(kWordClassBody) : fmt::format("[{}]", kWordClassBody);
      return true;
    case 'W':
      if (in_class) fail("regex '{}': \\W inside a character class is not supported", pattern);
      out += fmt::format("[^{}]", kWordClassBody);
      return true;
    case 'h':
    case 'H':
      fail("regex '{}': \\{} (Oniguruma hex digit class) is not supported", pattern, letter);
    default:
      return false;
  }
}

}  // namespace

struct Regex::Code {
  pcre2_code* code;
  explicit Code(pcre2_code* compiled) : code(compiled) {}
  ~Code() { pcre2_code_free(code); }
  Code(const Code&) = delete;
  Code& operator=(const Code&) = delete;
};

std::string translate_oniguruma(std::string_view pattern) {
  std::string out;
  bool in_class = false;
  for (size_t i = 0; i < pattern.size(); ++i) {
    const char c = pattern[i];
    if (c == '\\' && i + 1 < pattern.size()) {
      if (!translate_escape(pattern[i + 1], in_class, pattern, out)) out += pattern.substr(i, 2);
      ++i;
      continue;
    }
    if (c == '[' && !in_class) {
      in_class = true;
      out += c;
      // A ']' right after '[' or '[^' is a literal member, not the end of the class.
      if (i + 1 < pattern.size() && pattern[i + 1] == '^') out += pattern[++i];
      if (i + 1 < pattern.size() && pattern[i + 1] == ']') out += pattern[++i];
      continue;
    }
    if (c == '[' && in_class && (i + 1 >= pattern.size() || pattern[i + 1] != ':')) {
      fail("regex '{}': nested character classes are not supported", pattern);
    }
    if (c == ']' && in_class) in_class = false;
    out += c;
  }
  return out;
}

Regex Regex::from_oniguruma(std::string_view pattern) {
  return Regex(pattern, false);
}

Regex Regex::literal(std::string_view text) {
  return Regex(text, true);
}

Regex::Regex(std::string_view pattern, bool literal) : pattern_(pattern) {
  const std::string source = literal ? std::string(pattern) : translate_oniguruma(pattern);
  int error_code = 0;
  PCRE2_SIZE error_offset = 0;
  // PCRE2_LITERAL allows no UCP, which a literal does not need anyway.
  const uint32_t options = literal ? PCRE2_UTF | PCRE2_LITERAL : PCRE2_UTF | PCRE2_UCP;
  pcre2_code* compiled = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(source.data()), source.size(),
                                       options, &error_code, &error_offset, nullptr);
  if (compiled == nullptr) {
    fail("regex '{}' does not compile (at offset {}): {}", pattern, error_offset,
         pcre2_message(error_code));
  }
  code_ = std::make_shared<const Code>(compiled);
  const int jit_status = pcre2_jit_compile(compiled, PCRE2_JIT_COMPLETE);
  if (jit_status != 0) {
    fail("regex '{}': JIT compilation failed: {}", pattern, pcre2_message(jit_status));
  }
}

void Regex::find_all(std::string_view text, std::vector<Match>& matches) const {
  MatchScratch& scratch = match_scratch();
  const auto* subject = reinterpret_cast<PCRE2_SPTR>(text.data());
  size_t start = 0;
  while (start <= text.size()) {
    const int rc = pcre2_match(code_->code, subject, text.size(), start, PCRE2_NO_UTF_CHECK,
                               scratch.data, scratch.context);
    if (rc == PCRE2_ERROR_NOMATCH) return;
    if (rc < 0) fail("regex '{}' failed while matching: {}", pattern_, pcre2_message(rc));
    const PCRE2_SIZE* ovector = pcre2_get_ovector_pointer(scratch.data);
    const Match match{ovector[0], ovector[1]};
    if (match.end > match.begin) {
      matches.push_back(match);
      start = match.end;
    } else {
      // An empty match splits nothing; step over one whole character and search again.
      if (match.end >= text.size()) return;
      size_t next = match.end;
      utf8::decode_next(text, next);
      start = next;
    }
  }
}

}  // namespace mlaserve::tokenizer
