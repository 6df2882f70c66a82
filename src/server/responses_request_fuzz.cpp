// libFuzzer harness (fuzz/README.md): a /v1/responses body, as arbitrary bytes, through the JSON
// parse, the Responses API's request parsing (input items, tools, tool_choice, text.format,
// reasoning, options), a previous_response_id ("resp_stored" continues a stored conversation
// with a tool call; any other id is not stored), the rendered prompt (DeepSeek-V3's tokenizer
// and chat template), the token budget and the engine requests. Anything but a 4xx ApiError
// aborts.
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "server/json_fields.h"
#include "server/request_fuzz_support.h"
#include "server/responses.h"

using namespace mlaserve::server;
using namespace mlaserve::server::fuzzing;

namespace {

std::optional<nlohmann::ordered_json> stored_conversation(const std::string& id) {
  if (id != "resp_stored") return std::nullopt;
  return nlohmann::ordered_json::parse(R"([
    {"role": "user", "content": "Weather in Paris?"},
    {"role": "assistant", "content": "", "tool_calls": [{"id": "call_1", "type": "function",
      "function": {"name": "get_weather", "arguments": "{\"city\": \"Paris\"}"}}]}])");
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  (void)fuzz_tokenizer();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  const nlohmann::json body = fuzz_body(text);
  if (body.is_null()) return 0;
  expect_client_error_at_worst([&] {
    build_chat_requests(
        parse_responses_request(body, OrderedBody(text), fuzz_tokenizer(), stored_conversation)
            .chat);
  });
  return 0;
}
