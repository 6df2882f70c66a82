// libFuzzer harness (fuzz/README.md): a request body, as arbitrary bytes, through everything the
// three generation routes read from it before the engine: the JSON parse, the option parsing of
// /v1/completions, /v1/chat/completions and /generate, their prompts (tokenized with
// DeepSeek-V3's tokenizer and chat template), the token budget and the engine requests. A bad
// body must be a 4xx ApiError; a 5xx or any other exception would reach the client as a server
// error, so it aborts and libFuzzer reports it.
#include <string>

#include <nlohmann/json.hpp>

#include "server/chat_request.h"
#include "server/json_fields.h"
#include "server/openai_handlers.h"
#include "server/request_fuzz_support.h"

namespace {

using namespace mlaserve::server;
using namespace mlaserve::server::fuzzing;

const mlaserve::tokenizer::Tokenizer& tokenizer() {
  return fuzz_tokenizer();
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
  const nlohmann::json body = fuzz_body(text);
  if (body.is_null()) return 0;
  const int32_t vocab_size = tokenizer().vocab_size();
  expect_client_error_at_worst([&] {
    const GenerationOptions options = parse_openai_options(body, Api::Completions, vocab_size);
    build_requests(options, completion_prompts(body, tokenizer()));
  });
  expect_client_error_at_worst([&] {
    build_chat_requests(parse_chat_completions_request(body, OrderedBody(text), tokenizer()));
  });
  expect_client_error_at_worst([&] {
    const GenerationOptions options = parse_native_options(body, vocab_size);
    build_requests(options, native_prompts(body, tokenizer()).prompts);
  });
  return 0;
}
