// What the request-parsing fuzz harnesses share (fuzz/README.md): DeepSeek-V3's tokenizer and
// chat template, loaded once; the rule that a bad body is a 4xx ApiError and anything else (a
// 5xx, another exception) aborts so that libFuzzer reports it; and the token budget and engine
// requests each parsed request ends in.
#pragma once

#include <cstdint>
#include <cstdlib>
#include <functional>
#include <string>
#include <vector>

#include "server/api_error.h"
#include "server/chat_request.h"
#include "server/generation_options.h"
#include "server/json_fields.h"
#include "server/prompt_input.h"
#include "tokenizer/tokenizer.h"

namespace mlaserve::server::fuzzing {

inline constexpr int64_t kContextLength = 4096;
inline constexpr int64_t kDefaultMaxNewTokens = 128;

inline const tokenizer::Tokenizer& fuzz_tokenizer() {
  static const tokenizer::Tokenizer loaded =
      tokenizer::Tokenizer::load(MLASERVE_SOURCE_DIR "/tests/data/tokenizer/deepseek-v3");
  return loaded;
}

// Runs `parse`; a client error is an expected outcome, anything else aborts.
inline void expect_client_error_at_worst(const std::function<void()>& parse) {
  try {
    parse();
  } catch (const ApiError& error) {
    if (error.status() >= 500) std::abort();
  }
}

// The fuzz input as a request body: the JSON object it parses to, or null when the route would
// refuse it (with a client error) before reading any field.
inline nlohmann::json fuzz_body(const std::string& text) {
  nlohmann::json body;
  expect_client_error_at_worst([&] { body = parse_json_object(text); });
  return body.is_object() ? body : nlohmann::json();
}

inline void build_requests(const GenerationOptions& options, const std::vector<Prompt>& prompts) {
  for (const Prompt& prompt : prompts) {
    const int64_t max_new_tokens = resolve_max_new_tokens(
        prompt.ids.size(), options.max_new_tokens, kDefaultMaxNewTokens, kContextLength, "max");
    for (size_t choice = 0; choice < static_cast<size_t>(options.n); ++choice)
      (void)engine_request(options, prompt.ids, max_new_tokens, choice);
  }
}

// A parsed chat request rendered and turned into its engine requests.
inline void build_chat_requests(const ChatRequest& chat) {
  build_requests(chat.options, {render_chat_request(chat, fuzz_tokenizer())});
}

}  // namespace mlaserve::server::fuzzing
