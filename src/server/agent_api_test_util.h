// The server on the fake engine with DeepSeek-V3.1's chat template (its tool-call syntax and
// thinking switch) over brown-tiny's vocabulary, for the Anthropic Messages and OpenAI
// Responses tests: scripted answers, the prompts the engine got, and the chat route's prompt for
// the same conversation (each API's mapping onto chat messages must render what the chat route
// renders).
#pragma once

#include <string>
#include <vector>

#include "server/server_test_util.h"
#include "support/files.h"

namespace mlaserve::server::testing {

// get_weather's parameters: city (string) and unit ("c" or "f") required, days optional.
inline nlohmann::json weather_parameters() {
  return {{"type", "object"},
          {"properties",
           {{"city", {{"type", "string"}}},
            {"unit", {{"enum", {"c", "f"}}}},
            {"days", {{"type", "integer"}}}}},
          {"required", {"city", "unit"}}};
}

// A call in V3.1's syntax.
inline std::string v31_call_text(const std::string& name, const std::string& arguments) {
  return "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>" + name + "<｜tool▁sep｜>" + arguments +
         "<｜tool▁call▁end｜><｜tool▁calls▁end｜>";
}

// The chat route's form of the conversation both APIs' mapping tests send: a system prompt, a
// question, an answer with a get_weather call (id `call_id`, `arguments` as JSON text) and its
// result, with the get_weather tool described as "Current weather".
inline nlohmann::json weather_chat_conversation(const std::string& call_id,
                                                const std::string& arguments) {
  return {{"tools",
           {{{"type", "function"},
             {"function",
              {{"name", "get_weather"},
               {"description", "Current weather"},
               {"parameters", weather_parameters()}}}}}},
          {"messages",
           {{{"role", "system"}, {"content", "Be brief."}},
            {{"role", "user"}, {"content", "Weather in Paris?"}},
            {{"role", "assistant"},
             {"content", "Let me check."},
             {"tool_calls",
              {{{"id", call_id},
                {"type", "function"},
                {"function", {{"name", "get_weather"}, {"arguments", arguments}}}}}}},
            {{"role", "tool"}, {"tool_call_id", call_id}, {"content", "21 C"}}}}};
}

class AgentApiTest : public ServerTest {
 protected:
  void SetUp() override {
    FakeEngine::Options engine;
    engine.context_length = 4096;  // prompts with tools are long in brown-tiny's tokens
    start({}, engine,
          brown_tiny_tokenizer().with_chat_template(
              mlaserve::testing::read_text("tests/data/chat-v31/chat_template.jinja")));
  }

  // The engine answers `text`, then EOS.
  void answer(const std::string& text) {
    std::vector<int32_t> tokens = tokenizer().encode(text, /*add_special_tokens=*/false);
    tokens.push_back(*tokenizer().eos_id());
    script(tokens);
  }

  std::vector<int32_t> last_prompt() { return engine().submitted().back().prompt; }

  // The prompt /v1/chat/completions submits for `body` (max_tokens 1 added).
  std::vector<int32_t> chat_route_prompt(nlohmann::json body) {
    body["max_tokens"] = 1;
    post_json("/v1/chat/completions", body);
    return last_prompt();
  }

  // Expects `status` and returns the body; then checks that a good chat request still works.
  nlohmann::json expect_status(const std::string& path, const nlohmann::json& body, int status) {
    const httplib::Result result = post(path, body);
    if (!result) {
      ADD_FAILURE() << "no response from " << path;
      return nullptr;
    }
    EXPECT_EQ(result->status, status) << body.dump() << "\n" << result->body;
    EXPECT_EQ(result->get_header_value("Content-Type"), "application/json");
    const nlohmann::json parsed = nlohmann::json::parse(result->body, nullptr, false);
    EXPECT_FALSE(parsed.is_discarded()) << result->body;
    const httplib::Result good = post(
        "/v1/chat/completions",
        nlohmann::json{{"messages", {{{"role", "user"}, {"content", "Hi"}}}}, {"max_tokens", 1}});
    EXPECT_TRUE(good && good->status == 200);
    return parsed;
  }
};

}  // namespace mlaserve::server::testing
