// Structured output on the real engine (brown-tiny, whose text is English prose, never JSON on
// its own): sampled answers under a JSON schema, json_object, and forced tool calls all parse and
// validate, streamed and not, on one rank and under DP attention (where another rank's group
// leader applies the mask). The validator (support/json_schema_check) is independent of the
// grammar engine.
#include <gtest/gtest.h>

#include <memory>

#include "support/json_schema_check.h"
#include "support/server_process.h"

namespace mlaserve::testing {
namespace {

using nlohmann::json;

// A nested object with an enum, an integer array, a required boolean and a bounded string.
const json kSchema = json::parse(R"({
  "type": "object",
  "properties": {
    "kind": {"enum": ["cat", "dog", "fish"]},
    "ages": {"type": "array", "items": {"type": "integer"}, "maxItems": 4},
    "ok": {"type": "boolean"},
    "name": {"type": "string", "maxLength": 12},
    "owner": {"type": "object",
              "properties": {"id": {"type": "integer"}, "tag": {"type": ["string", "null"], "maxLength": 6}},
              "required": ["id", "tag"], "additionalProperties": false}
  },
  "required": ["kind", "ages", "ok", "name", "owner"],
  "additionalProperties": false
})");

const json kWeatherParameters = json::parse(R"({
  "type": "object",
  "properties": {"city": {"type": "string", "maxLength": 20}, "unit": {"enum": ["c", "f"]}},
  "required": ["city", "unit"], "additionalProperties": false
})");

json tools() {
  json tools = json::parse(R"([
    {"type": "function", "function": {"name": "get_weather"}},
    {"type": "function", "function": {"name": "get_time", "parameters":
      {"type": "object", "properties": {"zone": {"type": "string", "maxLength": 8}}}}}])");
  tools[0]["function"]["parameters"] = kWeatherParameters;
  return tools;
}

json user(const std::string& text) {
  return {{{"role", "user"}, {"content", text}}};
}

void expect_valid(const json& schema, const std::string& text) {
  const auto document = nlohmann::ordered_json::parse(text, nullptr, false);
  ASSERT_FALSE(document.is_discarded()) << "not JSON: " << text;
  EXPECT_EQ(json_schema_violation(nlohmann::ordered_json::parse(schema.dump()), document), "")
      << text;
}

class StructuredOutput : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    server_ = std::make_unique<ServerProcess>(GetParam());
    ASSERT_GT(server_->port(), 0) << server_->log();
  }
  ServerApi api() const { return ServerApi(server_->port()); }

  std::unique_ptr<ServerProcess> server_;
};

TEST(JsonSchemaCheck, PrefixesOfJson) {
  for (const char* prefix : {"", "{", "{\"a", "{\"a\": [1, -", "{\"a\": tr", "{\"a\": \"x\\"}) {
    EXPECT_TRUE(is_json_prefix(prefix)) << prefix;
  }
  for (const char* bad : {"}", "{,", "{\"a\" 1", "[1 2", "{\"a\": tx"}) {
    EXPECT_FALSE(is_json_prefix(bad)) << bad;
  }
}

TEST_P(StructuredOutput, SampledAnswersFollowTheSchema) {
  const int n = GetParam().empty() ? 50 : 8;  // fewer under 4 ranks on 2 cores
  const json body = {
      {"messages", user("Describe a pet.")},
      {"temperature", 1.0},
      {"seed", 1},
      {"n", n},
      {"max_tokens", 256},
      {"response_format",
       {{"type", "json_schema"}, {"json_schema", {{"name", "pet"}, {"schema", kSchema}}}}}};
  const json answer = api().post_json("/v1/chat/completions", body);
  ASSERT_EQ(answer["choices"].size(), static_cast<size_t>(n));
  for (const json& choice : answer["choices"]) {
    EXPECT_EQ(choice["finish_reason"], "stop");
    expect_valid(kSchema, choice["message"]["content"].get<std::string>());
  }
  // Streamed, the deltas add up to a valid document too.
  json streamed = body;
  streamed["n"] = 1;
  std::string text;
  for (const json& event : api().stream("/v1/chat/completions", streamed).events) {
    text += event["choices"][0]["delta"].value("content", "");
  }
  expect_valid(kSchema, text);
}

TEST_P(StructuredOutput, JsonObjectAndRegex) {
  const json object =
      api().post_json("/v1/completions", {{"prompt", "The jury said"},
                                          {"temperature", 1.0},
                                          {"seed", 7},
                                          {"n", 4},
                                          {"max_tokens", 96},
                                          {"response_format", {{"type", "json_object"}}}});
  // Free-form strings and members have no bound, and brown-tiny rarely closes an object: an
  // answer cut by max_tokens must still be the start of valid JSON.
  for (const json& choice : object["choices"]) {
    const std::string text = choice["text"].get<std::string>();
    EXPECT_TRUE(text.starts_with("{")) << text;
    if (choice["finish_reason"] == "stop") {
      EXPECT_TRUE(json::parse(text, nullptr, false).is_object()) << text;
    } else {
      EXPECT_TRUE(is_json_prefix(text)) << text;
    }
  }
  const json regex = api().post_json(
      "/generate",
      {{"text", "The jury said"},
       {"sampling_params",
        {{"temperature", 1.0}, {"max_new_tokens", 32}, {"regex", "(yes|no), [0-9]{2,4}"}}}});
  const std::string text = regex["text"].get<std::string>();
  EXPECT_TRUE(text.starts_with("yes, ") || text.starts_with("no, ")) << text;
  EXPECT_LE(text.size(), 9u) << text;
}

TEST_P(StructuredOutput, ANamedToolIsCalledWithValidArguments) {
  const json body = {
      {"messages", user("What is the weather in Paris?")},
      {"tools", tools()},
      {"tool_choice", {{"type", "function"}, {"function", {{"name", "get_weather"}}}}},
      {"temperature", 1.0},
      {"seed", 3},
      {"n", 4},
      {"max_tokens", 96}};
  for (const json& choice : api().post_json("/v1/chat/completions", body)["choices"]) {
    EXPECT_EQ(choice["finish_reason"], "tool_calls");
    ASSERT_EQ(choice["message"]["tool_calls"].size(), 1u) << choice;
    const json& call = choice["message"]["tool_calls"][0];
    EXPECT_EQ(call["function"]["name"], "get_weather");
    expect_valid(kWeatherParameters, call["function"]["arguments"].get<std::string>());
  }
  // Streamed: the name first, the arguments in pieces.
  json streamed = body;
  streamed["n"] = 1;
  std::string name, arguments, finish;
  for (const json& event : api().stream("/v1/chat/completions", streamed).events) {
    const json& choice = event["choices"][0];
    for (const json& call : choice["delta"].value("tool_calls", json::array())) {
      if (call["function"].contains("name")) name = call["function"]["name"];
      arguments += call["function"]["arguments"].get<std::string>();
    }
    if (!choice["finish_reason"].is_null()) finish = choice["finish_reason"];
  }
  EXPECT_EQ(name, "get_weather");
  EXPECT_EQ(finish, "tool_calls");
  expect_valid(kWeatherParameters, arguments);
}

TEST_P(StructuredOutput, AutoWithoutACallAnswersInText) {
  const json answer =
      api().post_json("/v1/chat/completions", {{"messages", user("Tell me a story.")},
                                               {"tools", tools()},
                                               {"temperature", 0.0},
                                               {"max_tokens", 16}});
  const json& message = answer["choices"][0]["message"];
  EXPECT_FALSE(message["content"].get<std::string>().empty());
  EXPECT_FALSE(message.contains("tool_calls"));
  EXPECT_EQ(answer["choices"][0]["finish_reason"], "length");
}

INSTANTIATE_TEST_SUITE_P(Layouts, StructuredOutput,
                         ::testing::Values("", "--tp 2 --dp 2 --enable-dp-attention"),
                         [](const auto& info) {
                           return info.param.empty() ? "SingleRank" : "DpAttention";
                         });

}  // namespace
}  // namespace mlaserve::testing
