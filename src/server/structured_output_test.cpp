// Structured output, tool calls and reasoning through the HTTP API, over the fake engine: the
// requests carry a grammar constraint that allows what the request asks for, the answers are
// parsed into reasoning_content and tool_calls (whole and streamed), and every bad spec is a 400.
#include <gmock/gmock.h>

#include <fmt/format.h>

#include <filesystem>

#include "server/api_error.h"
#include "server/server_test_util.h"
#include "server/tool_calls.h"
#include "support/files.h"

namespace mlaserve::server::testing {
namespace {

using ::testing::HasSubstr;

const nlohmann::json kUser = {{{"role", "user"}, {"content", "Weather in Paris?"}}};

nlohmann::json weather_tool() {
  return {{"type", "function"},
          {"function",
           {{"name", "get_weather"},
            {"description", "The weather in a city"},
            {"parameters",
             {{"type", "object"},
              {"properties", {{"city", {{"type", "string"}}}, {"unit", {{"enum", {"c", "f"}}}}}},
              {"required", {"city", "unit"}},
              {"additionalProperties", false}}}}}};
}

nlohmann::json time_tool() {
  return {{"type", "function"}, {"function", {{"name", "get_time"}}}};
}

std::string call_text(const std::string& name, const std::string& arguments) {
  using namespace deepseek_v3;
  return std::string(kCallsBegin) + std::string(kCallBegin) + "function" + std::string(kCallSep) +
         name + std::string(kArgumentsBegin) + arguments + std::string(kCallEnd) +
         std::string(kCallsEnd);
}

class StructuredOutputTest : public ServerTest {
 protected:
  // The fake engine answers every prompt with `text` then EOS.
  void answer(const std::string& text) {
    std::vector<int32_t> tokens = tokenizer().encode(text, /*add_special_tokens=*/false);
    tokens.push_back(*tokenizer().eos_id());
    script(tokens);
  }

  std::vector<nlohmann::json> stream(nlohmann::json body) {
    body["stream"] = true;
    const httplib::Result result = post("/v1/chat/completions", body);
    EXPECT_TRUE(result);
    return result ? sse_json_events(result->body) : std::vector<nlohmann::json>{};
  }

  void expect_bad_request(const std::string& path, const nlohmann::json& body,
                          const std::string& message_part) {
    const nlohmann::json error = post_json(path, body, 400);
    EXPECT_THAT(error["error"]["message"].get<std::string>(), HasSubstr(message_part)) << body;
  }
};

TEST_F(StructuredOutputTest, JsonSchemaRequestsCarryTheirGrammar) {
  const nlohmann::json schema = {{"type", "object"},
                                 {"properties", {{"n", {{"type", "integer"}}}}},
                                 {"required", {"n"}},
                                 {"additionalProperties", false}};
  answer(R"({"n": 12})");
  const nlohmann::json body = post_json(
      "/v1/chat/completions",
      {{"messages", kUser},
       {"response_format",
        {{"type", "json_schema"}, {"json_schema", {{"name", "n"}, {"schema", schema}}}}}});
  EXPECT_EQ(body["choices"][0]["message"]["content"], R"({"n": 12})");
  bool complete = false;
  EXPECT_TRUE(constraint_allows(R"({"n": 12})", &complete));
  EXPECT_TRUE(complete);

  post_json("/v1/completions",
            {{"prompt", "x"},
             {"max_tokens", 4},
             {"response_format",
              {{"type", "json_schema"}, {"json_schema", {{"name", "n"}, {"schema", schema}}}}}});
  EXPECT_FALSE(constraint_allows(R"({"m": 1})"));  // not the schema's property
  post_json("/v1/completions",
            {{"prompt", "x"}, {"max_tokens", 4}, {"response_format", {{"type", "json_object"}}}});
  EXPECT_TRUE(constraint_allows(R"({"any": [1, "two"]})", &complete));
  EXPECT_TRUE(complete);
  EXPECT_FALSE(constraint_allows("[1]"));  // json_object: an object, not an array

  // Plain requests have no constraint.
  post_json("/v1/completions", {{"prompt", "x"}, {"max_tokens", 1}});
  EXPECT_FALSE(engine().submitted().back().constraint);
}

TEST_F(StructuredOutputTest, NativeJsonSchemaAndRegex) {
  post_json("/generate", {{"text", "x"},
                          {"sampling_params",
                           {{"max_new_tokens", 4}, {"json_schema", R"({"type": "boolean"})"}}}});
  EXPECT_TRUE(constraint_allows("true"));
  EXPECT_FALSE(constraint_allows("1"));
  post_json("/generate", {{"text", "x"},
                          {"sampling_params", {{"max_new_tokens", 4}, {"regex", "[0-9]{3}-ab"}}}});
  bool complete = false;
  EXPECT_TRUE(constraint_allows("123-ab", &complete));
  EXPECT_TRUE(complete);
  post_json("/generate", {{"text", "x"},
                          {"sampling_params", {{"max_new_tokens", 4}, {"regex", "[0-9]{3}-ab"}}}});
  EXPECT_FALSE(constraint_allows("12a"));
}

TEST_F(StructuredOutputTest, BadSpecsAreBadRequests) {
  const auto format = [](const nlohmann::json& schema) {
    return nlohmann::json{
        {"messages", kUser},
        {"response_format", {{"type", "json_schema"}, {"json_schema", {{"schema", schema}}}}}};
  };
  expect_bad_request("/v1/chat/completions", format({{"type", "string"}, {"pattern", "^a"}}),
                     "pattern");
  expect_bad_request("/v1/chat/completions",
                     {{"messages", kUser}, {"response_format", {{"type", "xml"}}}}, "xml");
  expect_bad_request("/v1/chat/completions",
                     {{"messages", kUser}, {"response_format", {{"type", "json_schema"}}}},
                     "json_schema.schema");
  expect_bad_request("/generate",
                     {{"text", "x"}, {"sampling_params", {{"json_schema", "{not json"}}}},
                     "'json_schema' is not valid JSON");
  expect_bad_request("/generate", {{"text", "x"}, {"sampling_params", {{"regex", "(a"}}}}, "regex");
  expect_bad_request("/v1/chat/completions",
                     {{"messages", kUser},
                      {"tools", {weather_tool()}},
                      {"tool_choice", {{"type", "function"}, {"function", {{"name", "nope"}}}}}},
                     "'nope'");
  expect_bad_request("/v1/chat/completions", {{"messages", kUser}, {"tool_choice", "auto"}},
                     "only allowed when 'tools'");
  expect_bad_request("/v1/chat/completions",
                     {{"messages", kUser}, {"tools", {weather_tool()}}, {"tool_choice", "maybe"}},
                     "'maybe'");
  expect_bad_request("/v1/chat/completions",
                     {{"messages", kUser}, {"tools", {{{"type", "function"}}}}},
                     "tools[0].function");
  nlohmann::json bad_parameters = weather_tool();
  bad_parameters["function"]["parameters"]["properties"]["city"]["format"] = "uri";
  expect_bad_request(
      "/v1/chat/completions",
      {{"messages", kUser}, {"tools", {bad_parameters}}, {"tool_choice", "required"}}, "format");
  nlohmann::json ambiguous = {{"anyOf", nlohmann::json::array()}};
  for (int i = 0; i < 2100; ++i) {
    const std::string key = fmt::format("k{}", i);
    ambiguous["anyOf"].push_back(
        {{"type", "object"}, {"properties", {{key, {{"type", "integer"}}}}}, {"required", {key}}});
  }
  expect_bad_request("/v1/chat/completions", format(ambiguous), "too ambiguous");
  EXPECT_TRUE(engine().submitted().empty());  // nothing reached the engine
}

TEST_F(StructuredOutputTest, ANamedFunctionIsTheOnlyCallAllowed) {
  const std::string call = call_text("get_weather", R"({"city": "Paris", "unit": "c"})");
  answer(call);
  const nlohmann::json body =
      post_json("/v1/chat/completions",
                {{"messages", kUser},
                 {"tools", {weather_tool(), time_tool()}},
                 {"tool_choice", {{"type", "function"}, {"function", {{"name", "get_weather"}}}}}});
  bool complete = false;
  EXPECT_TRUE(constraint_allows(call, &complete));
  EXPECT_TRUE(complete);
  EXPECT_FALSE(constraint_allows(call_text("get_time", "{}")));
  EXPECT_FALSE(constraint_allows(call_text("get_weather", R"({"city": "Paris", "unit": "k"})")));
  EXPECT_FALSE(constraint_allows("It is sunny."));

  const nlohmann::json& choice = body["choices"][0];
  EXPECT_EQ(choice["finish_reason"], "tool_calls");
  EXPECT_TRUE(choice["message"]["content"].is_null());
  ASSERT_EQ(choice["message"]["tool_calls"].size(), 1u);
  const nlohmann::json& tool_call = choice["message"]["tool_calls"][0];
  EXPECT_EQ(tool_call["type"], "function");
  EXPECT_EQ(tool_call["function"]["name"], "get_weather");
  EXPECT_EQ(nlohmann::json::parse(tool_call["function"]["arguments"].get<std::string>()),
            nlohmann::json({{"city", "Paris"}, {"unit", "c"}}));

  // The prompt is what the chat template renders with the tools.
  const nlohmann::json tools = {weather_tool(), time_tool()};
  EXPECT_EQ(engine().submitted().back().prompt,
            tokenizer().encode(tokenizer().apply_chat_template(kUser, true, &tools), false));
}

TEST_F(StructuredOutputTest, RequiredAllowsAnyToolAndAutoLeavesTextAlone) {
  post_json("/v1/chat/completions", {{"messages", kUser},
                                     {"tools", {weather_tool(), time_tool()}},
                                     {"tool_choice", "required"},
                                     {"max_tokens", 1}});
  EXPECT_TRUE(constraint_allows(call_text("get_time", R"({"zone": "UTC"})")));
  post_json("/v1/chat/completions", {{"messages", kUser},
                                     {"tools", {weather_tool(), time_tool()}},
                                     {"tool_choice", "required"},
                                     {"max_tokens", 1}});
  EXPECT_FALSE(constraint_allows("Sunny"));

  answer("It is sunny.");
  const nlohmann::json body =
      post_json("/v1/chat/completions", {{"messages", kUser}, {"tools", {weather_tool()}}});
  EXPECT_FALSE(engine().submitted().back().constraint);  // auto: the model decides
  EXPECT_EQ(body["choices"][0]["message"]["content"], "It is sunny.");
  EXPECT_FALSE(body["choices"][0]["message"].contains("tool_calls"));
  EXPECT_EQ(body["choices"][0]["finish_reason"], "stop");
}

TEST_F(StructuredOutputTest, AutoParsesACallTheModelMakes) {
  answer("Let me check." + call_text("get_weather", R"({"city": "Oslo", "unit": "f"})"));
  const nlohmann::json request = {{"messages", kUser}, {"tools", {weather_tool()}}};
  const nlohmann::json body = post_json("/v1/chat/completions", request);
  const nlohmann::json& message = body["choices"][0]["message"];
  EXPECT_EQ(message["content"], "Let me check.");
  ASSERT_EQ(message["tool_calls"].size(), 1u);
  EXPECT_EQ(message["tool_calls"][0]["function"]["arguments"], R"({"city": "Oslo", "unit": "f"})");
  EXPECT_EQ(body["choices"][0]["finish_reason"], "tool_calls");

  // Streamed: content deltas, then the call's name first and its arguments in pieces.
  std::string content, arguments, name, id;
  nlohmann::json finish;
  for (const nlohmann::json& event : stream(request)) {
    const nlohmann::json& choice = event["choices"][0];
    const nlohmann::json& delta = choice["delta"];
    if (delta.contains("content")) content += delta["content"].get<std::string>();
    for (const nlohmann::json& call : delta.value("tool_calls", nlohmann::json::array())) {
      EXPECT_EQ(call["index"], 0);
      if (call.contains("id")) {
        EXPECT_TRUE(name.empty()) << "the name comes once";
        id = call["id"];
        name = call["function"]["name"];
        EXPECT_EQ(call["type"], "function");
      }
      EXPECT_FALSE(name.empty()) << "the name comes first";
      arguments += call["function"]["arguments"].get<std::string>();
    }
    if (!choice["finish_reason"].is_null()) finish = choice["finish_reason"];
  }
  EXPECT_EQ(content, "Let me check.");
  EXPECT_EQ(name, "get_weather");
  EXPECT_EQ(id.rfind("call_", 0), 0u);
  EXPECT_EQ(arguments, R"({"city": "Oslo", "unit": "f"})");
  EXPECT_EQ(finish, "tool_calls");
}

// A model whose chat template has no tool-call syntax cannot be asked to call tools.
TEST(ToolRequest, NeedsATemplateWithToolCalls) {
  const mlaserve::testing::TempDir dir;
  std::filesystem::copy_file(
      std::filesystem::path(mlaserve::testing::kBrownTinyTokenizerDir) / "tokenizer.json",
      dir / "tokenizer.json");
  mlaserve::testing::write_json(dir / "tokenizer_config.json",
                                {{"chat_template", "{{ messages[0]['content'] }}"}});
  const tokenizer::Tokenizer plain = tokenizer::Tokenizer::load(dir.path());
  const nlohmann::json body = {{"messages", kUser}, {"tools", {weather_tool()}}};
  const std::string text = body.dump();
  try {
    parse_tool_request(body, OrderedBody(text), plain);
    ADD_FAILURE() << "tools accepted without a tool-call syntax";
  } catch (const ApiError& error) {
    EXPECT_EQ(error.status(), 400);
    EXPECT_THAT(error.what(), HasSubstr("no tool-call syntax"));
  }
  EXPECT_TRUE(parse_tool_request(body, OrderedBody(text), brown_tiny_tokenizer()).has_value());
}

TEST_F(StructuredOutputTest, ReasoningParserSplitsTheThinking) {
  ServerOptions options;
  options.reasoning_parser = "deepseek-r1";
  start(options, {});
  answer("<think>Paris is in France.</think>\n\nMild, 18 degrees.");
  const nlohmann::json request = {{"messages", kUser}};
  const nlohmann::json body = post_json("/v1/chat/completions", request);
  const nlohmann::json& message = body["choices"][0]["message"];
  EXPECT_EQ(message["reasoning_content"], "Paris is in France.");
  EXPECT_EQ(message["content"], "Mild, 18 degrees.");

  std::string reasoning, content;
  for (const nlohmann::json& event : stream(request)) {
    const nlohmann::json& delta = event["choices"][0]["delta"];
    if (delta.contains("reasoning_content"))
      reasoning += delta["reasoning_content"].get<std::string>();
    if (delta.contains("content")) content += delta["content"].get<std::string>();
  }
  EXPECT_EQ(reasoning, "Paris is in France.");
  EXPECT_EQ(content, "Mild, 18 degrees.");
}

TEST_F(StructuredOutputTest, WithoutAReasoningParserThinkingIsContent) {
  answer("<think>hm</think>ok");
  const nlohmann::json body = post_json("/v1/chat/completions", {{"messages", kUser}});
  EXPECT_EQ(body["choices"][0]["message"]["content"], "<think>hm</think>ok");
  EXPECT_FALSE(body["choices"][0]["message"].contains("reasoning_content"));
}

}  // namespace
}  // namespace mlaserve::server::testing
