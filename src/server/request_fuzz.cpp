// libFuzzer harness (fuzz/README.md): a request body, as arbitrary bytes, through everything the
// three generation routes read from it before the engine: the JSON parse, the option parsing of
// /v1/completions, /v1/chat/completions and /generate, their prompts (tokenized with
// DeepSeek-V3's tokenizer and chat template), the token budget and the engine requests. A bad
// body must be a 4xx ApiError; a 5xx or any other exception would reach the client as a server
// error, so it aborts and libFuzzer reports it.
#include <cstdint>
#include <cstdlib>
#include <functional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "server/api_error.h"
#include "server/generation_options.h"
#include "server/json_fields.h"
#include "server/prompt_input.h"
#include "tokenizer/tokenizer.h"

namespace {

using namespace mlaserve::server;
using mlaserve::tokenizer::Tokenizer;

constexpr int64_t kContextLength = 4096;
constexpr int64_t kDefaultMaxNewTokens = 128;

const Tokenizer& tokenizer() {
  static const Tokenizer loaded =
      Tokenizer::load(MLASERVE_SOURCE_DIR "/tests/data/tokenizer/deepseek-v3");
  return loaded;
}

// Runs `parse`; a client error is an expected outcome, anything else aborts.
void expect_client_error_at_worst(const std::function<void()>& parse) {
  try {
    parse();
  } catch (const ApiError& error) {
    if (error.status() >= 500) std::abort();
  }
}

void build_requests(const GenerationOptions& options, const std::vector<Prompt>& prompts) {
  for (const Prompt& prompt : prompts) {
    const int64_t max_new_tokens = resolve_max_new_tokens(
        prompt.ids.size(), options.max_new_tokens, kDefaultMaxNewTokens, kContextLength, "max");
    for (size_t choice = 0; choice < static_cast<size_t>(options.n); ++choice)
      (void)engine_request(options, prompt.ids, max_new_tokens, choice);
  }
}

}  // namespace

// The tokenizer loads once, before the first input: its ~1 s (more under ASan) would otherwise
// count against that input's -timeout.
extern "C" int LLVMFuzzerInitialize(int*, char***) {
  (void)tokenizer();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  nlohmann::json body;
  expect_client_error_at_worst([&] { body = parse_json_object(text); });
  if (!body.is_object()) return 0;
  const int32_t vocab_size = tokenizer().vocab_size();
  expect_client_error_at_worst([&] {
    const GenerationOptions options = parse_openai_options(body, Api::Completions, vocab_size);
    build_requests(options, completion_prompts(body, tokenizer()));
  });
  expect_client_error_at_worst([&] {
    const GenerationOptions options = parse_openai_options(body, Api::Chat, vocab_size);
    const OrderedBody ordered(text);
    build_requests(options, {chat_prompt(chat_messages(body), tokenizer(), nullptr,
                                         chat_template_kwargs(body, ordered))});
  });
  expect_client_error_at_worst([&] {
    const GenerationOptions options = parse_native_options(body, vocab_size);
    build_requests(options, native_prompts(body, tokenizer()).prompts);
  });
  return 0;
}
