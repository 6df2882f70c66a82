// libFuzzer harness (fuzz/README.md): a /v1/messages body, as arbitrary bytes, through the JSON
// parse, Anthropic's request parsing (blocks, tools, tool_choice, thinking, options; the
// count_tokens form too), the rendered prompt (DeepSeek-V3's tokenizer and chat template), the
// token budget and the engine requests. Anything but a 4xx ApiError aborts.
#include <string>

#include <nlohmann/json.hpp>

#include "server/anthropic.h"
#include "server/json_fields.h"
#include "server/request_fuzz_support.h"

using namespace mlaserve::server;
using namespace mlaserve::server::fuzzing;

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  (void)fuzz_tokenizer();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  const nlohmann::json body = fuzz_body(text);
  if (body.is_null()) return 0;
  for (const bool count_only : {false, true}) {
    expect_client_error_at_worst([&] {
      build_chat_requests(
          parse_anthropic_request(body, OrderedBody(text), fuzz_tokenizer(), count_only));
    });
  }
  return 0;
}
