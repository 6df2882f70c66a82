// DeepSeek-V3.1's and V3.2's chat formats through the HTTP API, over the fake engine and
// brown-tiny's vocabulary (which has DeepSeek's marker tokens): chat_template_kwargs (and the 400
// for a wrong type), thinking on and off, reasoning split only when thinking is on, tool calls of
// either syntax parsed whole and streamed, and the tool_choice constraints of either syntax.
#include <gmock/gmock.h>

#include "server/agent_api_test_util.h"
#include "server/tool_calls.h"
#include "tokenizer/deepseek_v32_encoding.h"

namespace mlaserve::server::testing {
namespace {

using ::testing::EndsWith;
using ::testing::HasSubstr;
namespace dsv32 = tokenizer::dsv32;

const nlohmann::json kUser = {{{"role", "user"}, {"content", "Weather in Paris?"}}};

nlohmann::json weather_tool() {
  return {{"type", "function"},
          {"function", {{"name", "get_weather"}, {"parameters", weather_parameters()}}}};
}

// One call in a DSML calls block: V3.2's, or V4's.
std::string dsml_call_text(const std::string& name, const std::string& parameters,
                           ToolSyntax syntax = ToolSyntax::Dsml) {
  return "\n\n" + std::string(dsml_calls_begin(syntax)) + "\n" + std::string(dsv32::kInvokeBegin) +
         name + "\">\n" + parameters + "\n" + std::string(dsv32::kInvokeEnd) + "\n" +
         std::string(dsml_calls_end(syntax));
}

std::string dsml_parameter(const std::string& name, bool string, const std::string& value) {
  return std::string(dsv32::kParameterBegin) + name + "\" string=\"" + (string ? "true" : "false") +
         "\">" + value + std::string(dsv32::kParameterEnd);
}

class ChatFormatTest : public ServerTest {
 protected:
  void serve_v31() {
    start({}, {},
          brown_tiny_tokenizer().with_chat_template(
              mlaserve::testing::read_text("tests/data/chat-v31/chat_template.jinja")));
  }
  // DSML prompts with tools are long: a context of 4096 tokens.
  void serve_v32() {
    FakeEngine::Options engine;
    engine.context_length = 4096;
    start({}, engine, brown_tiny_tokenizer().with_chat_template("deepseek-v32"));
  }

  void answer(const std::string& text) {
    std::vector<int32_t> tokens = tokenizer().encode(text, /*add_special_tokens=*/false);
    tokens.push_back(*tokenizer().eos_id());
    script(tokens);
  }

  std::string last_prompt() {
    return tokenizer().decode(engine().submitted().back().prompt, /*skip_special_tokens=*/false);
  }

  // The streamed deltas of a chat answer, summed per field.
  nlohmann::json streamed(nlohmann::json body) {
    body["stream"] = true;
    const httplib::Result result = post("/v1/chat/completions", body);
    EXPECT_TRUE(result);
    nlohmann::json sum = {{"reasoning", ""}, {"content", ""}, {"calls", nlohmann::json::array()}};
    if (!result) return sum;
    for (const nlohmann::json& event : sse_json_events(result->body)) {
      if (!event.contains("choices") || event["choices"].empty()) continue;
      const nlohmann::json& delta = event["choices"][0]["delta"];
      if (delta.contains("reasoning_content"))
        sum["reasoning"] =
            sum["reasoning"].get<std::string>() + delta["reasoning_content"].get<std::string>();
      if (delta.contains("content") && delta["content"].is_string())
        sum["content"] = sum["content"].get<std::string>() + delta["content"].get<std::string>();
      for (const nlohmann::json& call : delta.value("tool_calls", nlohmann::json::array())) {
        const size_t index = call["index"].get<size_t>();
        if (index >= sum["calls"].size()) sum["calls"].push_back({{"name", ""}, {"arguments", ""}});
        if (call["function"].contains("name"))
          sum["calls"][index]["name"] = call["function"]["name"];
        sum["calls"][index]["arguments"] = sum["calls"][index]["arguments"].get<std::string>() +
                                           call["function"]["arguments"].get<std::string>();
      }
    }
    return sum;
  }

  void expect_bad_kwargs(const nlohmann::json& kwargs, const std::string& param) {
    const nlohmann::json error = post_json(
        "/v1/chat/completions", {{"messages", kUser}, {"chat_template_kwargs", kwargs}}, 400);
    EXPECT_EQ(error["error"]["param"], param) << kwargs;
    EXPECT_EQ(error["error"]["type"], "invalid_request_error");
    EXPECT_THAT(error["error"]["message"].get<std::string>(), HasSubstr(param));
  }
};

TEST_F(ChatFormatTest, WrongKwargsAreBadRequests) {
  serve_v31();
  expect_bad_kwargs("thinking", "chat_template_kwargs");
  expect_bad_kwargs(nlohmann::json::array({1}), "chat_template_kwargs");
  expect_bad_kwargs({{"thinking", "yes"}}, "chat_template_kwargs.thinking");
  expect_bad_kwargs({{"enable_thinking", 1}}, "chat_template_kwargs.enable_thinking");
  expect_bad_kwargs({{"messages", nlohmann::json::array()}}, "chat_template_kwargs.messages");
  // A content part whose type is not a string (a request_fuzz finding: it escaped as a JSON
  // type error).
  const nlohmann::json error = post_json(
      "/v1/chat/completions",
      {{"messages", {{{"role", "user"}, {"content", {{{"type", 5}, {"text", "x"}}}}}}}}, 400);
  EXPECT_EQ(error["error"]["param"], "messages");
  // Other variables reach the template as they are.
  post_json("/v1/chat/completions",
            {{"messages", kUser}, {"max_tokens", 1}, {"chat_template_kwargs", {{"x", {1, 2}}}}});
}

TEST_F(ChatFormatTest, V31ThinkingOnSplitsTheReasoning) {
  serve_v31();
  answer("Paris is in France.</think>It is sunny.");
  nlohmann::json body = {{"messages", kUser}, {"chat_template_kwargs", {{"thinking", true}}}};
  const nlohmann::json message = post_json("/v1/chat/completions", body)["choices"][0]["message"];
  EXPECT_THAT(last_prompt(), EndsWith("<｜User｜>Weather in Paris?<｜Assistant｜><think>"));
  EXPECT_EQ(message["reasoning_content"], "Paris is in France.");
  EXPECT_EQ(message["content"], "It is sunny.");
  const nlohmann::json sum = streamed(body);
  EXPECT_EQ(sum["reasoning"], "Paris is in France.");
  EXPECT_EQ(sum["content"], "It is sunny.");
  // /tokenize renders a chat as the chat API does.
  const nlohmann::json tokens = post_json("/tokenize", body)["tokens"];
  EXPECT_THAT(tokenizer().decode(tokens.get<std::vector<int32_t>>(), false), EndsWith("<think>"));
}

TEST_F(ChatFormatTest, V31ThinkingOffIsAllContent) {
  // Even with a reasoning parser: the template's switch decides.
  ServerOptions options;
  options.reasoning_parser = "deepseek-r1";
  start(options, {},
        brown_tiny_tokenizer().with_chat_template(
            mlaserve::testing::read_text("tests/data/chat-v31/chat_template.jinja")));
  answer("Sunny.</think>Really.");
  for (const nlohmann::json& kwargs :
       {nlohmann::json::object(), nlohmann::json{{"thinking", false}}}) {
    const nlohmann::json message =
        post_json("/v1/chat/completions",
                  {{"messages", kUser}, {"chat_template_kwargs", kwargs}})["choices"][0]["message"];
    EXPECT_THAT(last_prompt(), EndsWith("<｜Assistant｜></think>"));
    EXPECT_FALSE(message.contains("reasoning_content"));
    EXPECT_EQ(message["content"], "Sunny.</think>Really.");
  }
}

TEST_F(ChatFormatTest, V31ToolCallsParsedWholeAndStreamed) {
  serve_v31();
  answer("Let me check." + v31_call_text("get_weather", R"({"city": "Paris", "unit": "c"})"));
  const nlohmann::json body = {{"messages", kUser}, {"tools", {weather_tool()}}};
  const nlohmann::json choice = post_json("/v1/chat/completions", body)["choices"][0];
  EXPECT_EQ(choice["finish_reason"], "tool_calls");
  EXPECT_EQ(choice["message"]["content"], "Let me check.");
  ASSERT_EQ(choice["message"]["tool_calls"].size(), 1u);
  EXPECT_EQ(choice["message"]["tool_calls"][0]["function"]["name"], "get_weather");
  EXPECT_EQ(choice["message"]["tool_calls"][0]["function"]["arguments"],
            R"({"city": "Paris", "unit": "c"})");
  const nlohmann::json sum = streamed(body);
  EXPECT_EQ(sum["content"], "Let me check.");
  ASSERT_EQ(sum["calls"].size(), 1u);
  EXPECT_EQ(sum["calls"][0]["name"], "get_weather");
  EXPECT_EQ(sum["calls"][0]["arguments"], R"({"city": "Paris", "unit": "c"})");
}

TEST_F(ChatFormatTest, V31ToolChoiceForcesV31Syntax) {
  serve_v31();
  post_json("/v1/chat/completions",
            {{"messages", kUser},
             {"max_tokens", 1},
             {"tools", {weather_tool()}},
             {"tool_choice", {{"type", "function"}, {"function", {{"name", "get_weather"}}}}}});
  bool complete = false;
  EXPECT_TRUE(constraint_allows(v31_call_text("get_weather", R"({"city": "Rome", "unit": "f"})"),
                                &complete));
  EXPECT_TRUE(complete);
  post_json("/v1/chat/completions", {{"messages", kUser},
                                     {"max_tokens", 1},
                                     {"tools", {weather_tool()}},
                                     {"tool_choice", "required"}});
  // V3's syntax (type and fence) is not V3.1's.
  EXPECT_FALSE(constraint_allows(
      "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>get_weather\n```json\n"));
  // With thinking on, the forced call first closes the thinking block.
  post_json("/v1/chat/completions", {{"messages", kUser},
                                     {"max_tokens", 1},
                                     {"tools", {weather_tool()}},
                                     {"tool_choice", "required"},
                                     {"chat_template_kwargs", {{"thinking", true}}}});
  EXPECT_TRUE(constraint_allows(
      "</think>" + v31_call_text("get_weather", R"({"city": "Rome", "unit": "f"})"), &complete));
  EXPECT_TRUE(complete);
}

TEST_F(ChatFormatTest, V32PromptToolsAndThinking) {
  serve_v32();
  answer("Hi.");
  // The tool schema is printed in the client's key order (not sorted).
  const httplib::Result result = post("/v1/chat/completions", std::string(R"({
    "messages": [{"role": "user", "content": "Weather in Paris?"}],
    "tools": [{"type": "function", "function": {"name": "get_weather", "parameters": {
      "type": "object", "properties": {"unit": {"enum": ["c", "f"]}, "city": {"type": "string"}}}}}]})"));
  ASSERT_TRUE(result);
  EXPECT_EQ(result->status, 200) << result->body;
  const std::string prompt = last_prompt();
  EXPECT_THAT(prompt, HasSubstr("## Tools"));
  EXPECT_THAT(prompt, HasSubstr(R"({"name": "get_weather", "parameters": {"type": "object", )"
                                R"("properties": {"unit": {"enum": ["c", "f"]}, "city": )"));
  EXPECT_THAT(prompt, EndsWith("<｜User｜>Weather in Paris?<｜Assistant｜></think>"));
  const nlohmann::json message =
      post_json("/v1/chat/completions", {{"messages", kUser}})["choices"][0]["message"];
  EXPECT_FALSE(message.contains("reasoning_content"));
  answer("Sun in Paris.</think>Sunny.");
  const nlohmann::json thinking =
      post_json("/v1/chat/completions",
                {{"messages", kUser},
                 {"chat_template_kwargs", {{"thinking", true}}}})["choices"][0]["message"];
  EXPECT_THAT(last_prompt(), EndsWith("<｜Assistant｜><think>"));
  EXPECT_EQ(thinking["reasoning_content"], "Sun in Paris.");
  EXPECT_EQ(thinking["content"], "Sunny.");
}

TEST_F(ChatFormatTest, V32DsmlCallsParsedWholeAndStreamed) {
  serve_v32();
  const std::string parameters = dsml_parameter("city", true, "Paris \"center\"") + "\n" +
                                 dsml_parameter("unit", true, "c") + "\n" +
                                 dsml_parameter("days", false, "3");
  answer("Checking." + dsml_call_text("get_weather", parameters));
  const std::string arguments = R"({"city": "Paris \"center\"", "unit": "c", "days": 3})";
  const nlohmann::json body = {{"messages", kUser}, {"tools", {weather_tool()}}};
  const nlohmann::json choice = post_json("/v1/chat/completions", body)["choices"][0];
  EXPECT_EQ(choice["finish_reason"], "tool_calls");
  EXPECT_EQ(choice["message"]["content"], "Checking.");
  ASSERT_EQ(choice["message"]["tool_calls"].size(), 1u);
  EXPECT_EQ(choice["message"]["tool_calls"][0]["function"]["name"], "get_weather");
  EXPECT_EQ(choice["message"]["tool_calls"][0]["function"]["arguments"], arguments);
  const nlohmann::json sum = streamed(body);
  EXPECT_EQ(sum["content"], "Checking.");
  ASSERT_EQ(sum["calls"].size(), 1u);
  EXPECT_EQ(sum["calls"][0]["arguments"], arguments);
}

// DeepSeek-V4's encoder (built in): its DSML calls (in a tool_calls block) parsed, and a forced
// call written in V4's block.
TEST_F(ChatFormatTest, V4DsmlCallsParsedAndForced) {
  FakeEngine::Options engine;
  engine.context_length = 4096;
  start({}, engine, brown_tiny_tokenizer().with_chat_template("deepseek-v4"));
  const std::string parameters =
      dsml_parameter("city", true, "Paris") + "\n" + dsml_parameter("unit", true, "c");
  answer("Checking." + dsml_call_text("get_weather", parameters, ToolSyntax::DsmlV4));
  const nlohmann::json body = {{"messages", kUser}, {"tools", {weather_tool()}}};
  const nlohmann::json choice = post_json("/v1/chat/completions", body)["choices"][0];
  EXPECT_EQ(choice["finish_reason"], "tool_calls");
  EXPECT_EQ(choice["message"]["content"], "Checking.");
  ASSERT_EQ(choice["message"]["tool_calls"].size(), 1u);
  EXPECT_EQ(choice["message"]["tool_calls"][0]["function"]["arguments"],
            R"({"city": "Paris", "unit": "c"})");
  EXPECT_EQ(streamed(body)["calls"][0]["arguments"], R"({"city": "Paris", "unit": "c"})");
  nlohmann::json forced = body;
  forced["max_tokens"] = 1;
  forced["tool_choice"] = {{"type", "function"}, {"function", {{"name", "get_weather"}}}};
  post_json("/v1/chat/completions", forced);
  bool complete = false;
  EXPECT_TRUE(
      constraint_allows(dsml_call_text("get_weather", parameters, ToolSyntax::DsmlV4), &complete));
  EXPECT_TRUE(complete);
  post_json("/v1/chat/completions", forced);
  EXPECT_FALSE(constraint_allows(dsml_call_text("get_weather", parameters, ToolSyntax::Dsml)));
  // OpenAI's reasoning_effort reaches the encoder ("max" asks for exhaustive thinking; "low" is
  // V4's default).
  answer("ok");
  post_json("/v1/chat/completions", {{"messages", kUser},
                                     {"reasoning_effort", "max"},
                                     {"chat_template_kwargs", {{"thinking", true}}}});
  EXPECT_THAT(last_prompt(), HasSubstr("Reasoning Effort: Absolute maximum"));
  post_json("/v1/chat/completions", {{"messages", kUser},
                                     {"reasoning_effort", "low"},
                                     {"chat_template_kwargs", {{"thinking", true}}}});
  EXPECT_THAT(last_prompt(), ::testing::Not(HasSubstr("Reasoning Effort")));
  post_json("/v1/chat/completions", {{"messages", kUser}, {"reasoning_effort", 3}}, 400);
}

TEST_F(ChatFormatTest, V32ToolChoiceForcesDsml) {
  serve_v32();
  post_json("/v1/chat/completions",
            {{"messages", kUser},
             {"max_tokens", 1},
             {"tools", {weather_tool()}},
             {"tool_choice", {{"type", "function"}, {"function", {{"name", "get_weather"}}}}}});
  const std::string call =
      dsml_call_text("get_weather", dsml_parameter("city", true, "Rome") + "\n" +
                                        dsml_parameter("unit", true, "f"));
  bool complete = false;
  EXPECT_TRUE(constraint_allows(call, &complete));
  EXPECT_TRUE(complete);
  post_json("/v1/chat/completions", {{"messages", kUser},
                                     {"max_tokens", 1},
                                     {"tools", {weather_tool()}},
                                     {"tool_choice", "required"}});
  // The optional integer as JSON, in the schema's order (the test's body has sorted keys); a
  // unit outside the enum is refused.
  EXPECT_TRUE(constraint_allows(
      dsml_call_text("get_weather", dsml_parameter("city", true, "Rome") + "\n" +
                                        dsml_parameter("days", false, "12") + "\n" +
                                        dsml_parameter("unit", true, "f"))));
  post_json("/v1/chat/completions", {{"messages", kUser},
                                     {"max_tokens", 1},
                                     {"tools", {weather_tool()}},
                                     {"tool_choice", "required"}});
  EXPECT_FALSE(
      constraint_allows(dsml_call_text("get_weather", dsml_parameter("city", true, "Rome") + "\n" +
                                                          dsml_parameter("unit", true, "k"))));
  post_json("/v1/chat/completions", {{"messages", kUser},
                                     {"max_tokens", 1},
                                     {"tools", {weather_tool()}},
                                     {"tool_choice", "required"},
                                     {"chat_template_kwargs", {{"thinking", true}}}});
  EXPECT_TRUE(constraint_allows("</think>" + call, &complete));
  EXPECT_TRUE(complete);
}

}  // namespace
}  // namespace mlaserve::server::testing
