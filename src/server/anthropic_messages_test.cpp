// Anthropic's Messages API over the fake engine: its message and stream shapes, its blocks
// rendered exactly as the chat route renders the same conversation, tool_use and tool_result,
// tool_choice's constraints, thinking, stop reasons, count_tokens, and its errors (in
// Anthropic's shape; the server keeps serving after each).
#include <gmock/gmock.h>

#include "server/agent_api_test_util.h"

namespace mlaserve::server::testing {
namespace {

using mlaserve::testing::named_events;
using mlaserve::testing::NamedEvent;

const nlohmann::json kUser = {{{"role", "user"}, {"content", "Weather in Paris?"}}};

nlohmann::json weather_tool() {
  return {{"name", "get_weather"},
          {"description", "Current weather"},
          {"input_schema", weather_parameters()}};
}

class MessagesTest : public AgentApiTest {
 protected:
  nlohmann::json create(nlohmann::json body, int status = 200) {
    if (!body.contains("max_tokens")) body["max_tokens"] = 64;
    return post_json("/v1/messages", body, status);
  }

  // The streamed events of `body`.
  std::vector<NamedEvent> stream(nlohmann::json body) {
    if (!body.contains("max_tokens")) body["max_tokens"] = 64;
    body["stream"] = true;
    const httplib::Result result = post("/v1/messages", body);
    EXPECT_TRUE(result && result->status == 200);
    return result ? named_events(result->body) : std::vector<NamedEvent>{};
  }

  // A 400 in Anthropic's shape naming what is wrong.
  void expect_invalid(const nlohmann::json& body, const std::string& says) {
    const nlohmann::json error = expect_status("/v1/messages", body, 400);
    EXPECT_EQ(error["type"], "error") << body.dump();
    EXPECT_EQ(error["error"]["type"], "invalid_request_error") << body.dump();
    EXPECT_THAT(error["error"]["message"].get<std::string>(), ::testing::HasSubstr(says))
        << body.dump();
  }
};

// The blocks a stream built, as a non-streamed message's content.
nlohmann::json streamed_content(const std::vector<NamedEvent>& events) {
  nlohmann::json content = nlohmann::json::array();
  std::vector<std::string> inputs;
  for (const NamedEvent& event : events) {
    if (event.name == "content_block_start") {
      EXPECT_EQ(event.data["index"], content.size());
      content.push_back(event.data["content_block"]);
      inputs.emplace_back();
    } else if (event.name == "content_block_delta") {
      nlohmann::json& block = content.at(event.data["index"].get<size_t>());
      const nlohmann::json& delta = event.data["delta"];
      if (delta["type"] == "text_delta")
        block["text"] = block["text"].get<std::string>() + delta["text"].get<std::string>();
      if (delta["type"] == "thinking_delta")
        block["thinking"] =
            block["thinking"].get<std::string>() + delta["thinking"].get<std::string>();
      if (delta["type"] == "input_json_delta")
        inputs.back() += delta["partial_json"].get<std::string>();
    } else if (event.name == "content_block_stop") {
      nlohmann::json& block = content.at(event.data["index"].get<size_t>());
      if (block["type"] == "tool_use") block["input"] = nlohmann::json::parse(inputs.back());
    }
  }
  return content;
}

TEST_F(MessagesTest, TextReply) {
  answer("Sunny and warm.");
  const nlohmann::json message = create({{"messages", kUser}});
  EXPECT_EQ(message["type"], "message");
  EXPECT_EQ(message["role"], "assistant");
  EXPECT_EQ(message["model"], kModelName);
  EXPECT_THAT(message["id"].get<std::string>(), ::testing::StartsWith("msg_"));
  EXPECT_EQ(message["content"],
            nlohmann::json::parse(R"([{"type": "text", "text": "Sunny and warm."}])"));
  EXPECT_EQ(message["stop_reason"], "end_turn");
  EXPECT_EQ(message["stop_sequence"], nullptr);
  EXPECT_EQ(message["usage"]["input_tokens"], last_prompt().size());
  EXPECT_EQ(message["usage"]["output_tokens"],
            tokenizer().encode("Sunny and warm.", false).size() + 1);
}

// System blocks, text blocks, a tool_use turn and its tool_result render as the chat route
// renders the same conversation in OpenAI's shape.
TEST_F(MessagesTest, BlocksRenderAsTheChatConversation) {
  answer("ok");
  const nlohmann::json body = {
      {"system", {{{"type", "text"}, {"text", "Be brief."}}}},
      {"tools", {weather_tool()}},
      {"messages",
       {{{"role", "user"}, {"content", {{{"type", "text"}, {"text", "Weather in Paris?"}}}}},
        {{"role", "assistant"},
         {"content",
          {{{"type", "text"}, {"text", "Let me check."}},
           {{"type", "tool_use"},
            {"id", "toolu_1"},
            {"name", "get_weather"},
            {"input", {{"city", "Paris"}, {"unit", "c"}}}}}}},
        {{"role", "user"},
         {"content",
          {{{"type", "tool_result"}, {"tool_use_id", "toolu_1"}, {"content", "21 C"}}}}}}}};
  create(body);
  const std::vector<int32_t> prompt = last_prompt();
  EXPECT_EQ(prompt, chat_route_prompt(weather_chat_conversation(
                        "toolu_1", nlohmann::json({{"city", "Paris"}, {"unit", "c"}}).dump())));
}

TEST_F(MessagesTest, ToolUseReplyAndStream) {
  answer("Let me check." + v31_call_text("get_weather", R"({"city": "Paris", "unit": "c"})"));
  const nlohmann::json body = {{"messages", kUser}, {"tools", {weather_tool()}}};
  const nlohmann::json message = create(body);
  EXPECT_EQ(message["stop_reason"], "tool_use");
  ASSERT_EQ(message["content"].size(), 2u) << message.dump();
  EXPECT_EQ(message["content"][0]["text"], "Let me check.");
  const nlohmann::json& call = message["content"][1];
  EXPECT_EQ(call["type"], "tool_use");
  EXPECT_EQ(call["name"], "get_weather");
  EXPECT_EQ(call["input"], nlohmann::json({{"city", "Paris"}, {"unit", "c"}}));
  EXPECT_FALSE(call["id"].get<std::string>().empty());

  const std::vector<NamedEvent> events = stream(body);
  ASSERT_GE(events.size(), 4u);
  EXPECT_EQ(events.front().name, "message_start");
  EXPECT_EQ(events.front().data["message"]["usage"]["input_tokens"],
            message["usage"]["input_tokens"]);
  EXPECT_EQ(events.back().name, "message_stop");
  const NamedEvent& delta = events[events.size() - 2];
  EXPECT_EQ(delta.name, "message_delta");
  EXPECT_EQ(delta.data["delta"]["stop_reason"], "tool_use");
  EXPECT_EQ(delta.data["usage"]["output_tokens"], message["usage"]["output_tokens"]);
  nlohmann::json content = streamed_content(events);
  ASSERT_EQ(content.size(), 2u);
  content[1]["id"] = call["id"];
  EXPECT_EQ(content, message["content"]);
}

TEST_F(MessagesTest, ToolChoiceConstrainsTheReply) {
  nlohmann::json body = {{"messages", kUser}, {"max_tokens", 1}, {"tools", {weather_tool()}}};
  body["tool_choice"] = {{"type", "tool"}, {"name", "get_weather"}};
  create(body);
  bool complete = false;
  EXPECT_TRUE(constraint_allows(v31_call_text("get_weather", R"({"city": "Rome", "unit": "f"})"),
                                &complete));
  EXPECT_TRUE(complete);
  EXPECT_FALSE(constraint_allows("Sure"));
  body["tool_choice"] = {{"type", "any"}};
  create(body);
  EXPECT_FALSE(constraint_allows("Sure"));
  body["tool_choice"] = {{"type", "auto"}};
  create(body);
  EXPECT_EQ(engine().submitted().back().constraint, nullptr);
  body["tool_choice"] = {{"type", "none"}};
  create(body);
  EXPECT_EQ(engine().submitted().back().constraint, nullptr);
}

TEST_F(MessagesTest, ThinkingBlocks) {
  answer("Paris is in France.</think>Sunny.");
  const nlohmann::json body = {{"messages", kUser},
                               {"max_tokens", 2000},
                               {"thinking", {{"type", "enabled"}, {"budget_tokens", 1024}}}};
  const nlohmann::json message = create(body);
  ASSERT_EQ(message["content"].size(), 2u) << message.dump();
  EXPECT_EQ(message["content"][0]["type"], "thinking");
  EXPECT_EQ(message["content"][0]["thinking"], "Paris is in France.");
  EXPECT_EQ(message["content"][1]["text"], "Sunny.");
  EXPECT_EQ(streamed_content(stream(body)), message["content"]);
  // Without thinking the template does not open a thinking block: all of it is text.
  const nlohmann::json plain = create({{"messages", kUser}});
  ASSERT_EQ(plain["content"].size(), 1u);
  EXPECT_EQ(plain["content"][0]["type"], "text");
}

// Claude Code's requests: adaptive thinking, and system turns between the others.
TEST_F(MessagesTest, AdaptiveThinkingAndSystemTurns) {
  answer("Short.</think>Hi.");
  const nlohmann::json message =
      create({{"thinking", {{"type", "adaptive"}}},
              {"messages",
               {{{"role", "user"}, {"content", "Hello"}},
                {{"role", "system"}, {"content", {{{"type", "text"}, {"text", "Be brief."}}}}}}}});
  ASSERT_EQ(message["content"].size(), 2u) << message.dump();
  EXPECT_EQ(message["content"][0]["thinking"], "Short.");
  const std::vector<int32_t> prompt = last_prompt();
  EXPECT_EQ(prompt, chat_route_prompt({{"messages",
                                        {{{"role", "user"}, {"content", "Hello"}},
                                         {{"role", "system"}, {"content", "Be brief."}}}},
                                       {"chat_template_kwargs", {{"thinking", true}}}}));
}

TEST_F(MessagesTest, StopReasons) {
  answer("Sunny and warm.");
  const nlohmann::json stopped = create({{"messages", kUser}, {"stop_sequences", {" and"}}});
  EXPECT_EQ(stopped["stop_reason"], "stop_sequence");
  EXPECT_EQ(stopped["stop_sequence"], " and");
  EXPECT_EQ(stopped["content"][0]["text"], "Sunny");
  const nlohmann::json cut = create({{"messages", kUser}, {"max_tokens", 1}});
  EXPECT_EQ(cut["stop_reason"], "max_tokens");
  EXPECT_EQ(cut["usage"]["output_tokens"], 1);
}

TEST_F(MessagesTest, CountTokensIsThePromptOfCreate) {
  const nlohmann::json body = {
      {"system", "Be brief."}, {"messages", kUser}, {"tools", {weather_tool()}}};
  const nlohmann::json counted = post_json("/v1/messages/count_tokens", body);
  answer("ok");
  create(body);
  EXPECT_EQ(counted["input_tokens"], last_prompt().size());
}

TEST_F(MessagesTest, AuthenticationByEitherHeader) {
  ServerOptions options;
  options.api_key = "sk-test";
  FakeEngine::Options engine;
  engine.context_length = 4096;
  start(options, engine,
        brown_tiny_tokenizer().with_chat_template(
            mlaserve::testing::read_text("tests/data/chat-v31/chat_template.jinja")));
  answer("ok");
  const nlohmann::json body = {{"messages", kUser}, {"max_tokens", 4}};
  const httplib::Result missing = post("/v1/messages", body);
  ASSERT_TRUE(missing);
  EXPECT_EQ(missing->status, 401);
  EXPECT_EQ(nlohmann::json::parse(missing->body)["error"]["type"], "authentication_error");
  const httplib::Result with_key =
      post("/v1/messages", body, {{"x-api-key", "sk-test"}, {"anthropic-version", "2023-06-01"}});
  ASSERT_TRUE(with_key);
  EXPECT_EQ(with_key->status, 200) << with_key->body;
  EXPECT_THAT(with_key->get_header_value("request-id"), ::testing::StartsWith("req_"));
  EXPECT_THAT(missing->get_header_value("request-id"), ::testing::StartsWith("req_"));
  const httplib::Result bearer = post("/v1/messages", body, {{"Authorization", "Bearer sk-test"}});
  ASSERT_TRUE(bearer);
  EXPECT_EQ(bearer->status, 200);
}

TEST_F(MessagesTest, UnknownPathsAnswerInAnthropicsShape) {
  const httplib::Result batches = get("/v1/messages/batches");
  ASSERT_TRUE(batches);
  EXPECT_EQ(batches->status, 404);
  EXPECT_EQ(nlohmann::json::parse(batches->body)["error"]["type"], "not_found_error");
  const httplib::Result wrong_method = get("/v1/messages");
  ASSERT_TRUE(wrong_method);
  EXPECT_EQ(wrong_method->status, 405);
  EXPECT_EQ(nlohmann::json::parse(wrong_method->body)["type"], "error");
}

TEST_F(MessagesTest, UnknownModelIsNotFound) {
  const nlohmann::json error = expect_status(
      "/v1/messages", {{"model", "claude-x"}, {"max_tokens", 4}, {"messages", kUser}}, 404);
  EXPECT_EQ(error["error"]["type"], "not_found_error");
}

nlohmann::json with(nlohmann::json body, const std::string& key, nlohmann::json value) {
  body[key] = std::move(value);
  return body;
}

nlohmann::json user_blocks(nlohmann::json blocks) {
  return {{{"role", "user"}, {"content", std::move(blocks)}}};
}

// Each malformed or unsupported body: a 400 in Anthropic's shape whose message names the field.
TEST_F(MessagesTest, BadRequests) {
  const nlohmann::json good = {{"max_tokens", 8}, {"messages", kUser}};
  const nlohmann::json call_turn = {{"role", "assistant"},
                                    {"content",
                                     {{{"type", "tool_use"},
                                       {"id", "t1"},
                                       {"name", "get_weather"},
                                       {"input", nlohmann::json::object()}}}}};
  const std::vector<std::pair<nlohmann::json, std::string>> cases = {
      {{{"messages", kUser}}, "'max_tokens' is required"},
      {with(good, "max_tokens", "8"), "'max_tokens' must be an integer"},
      {with(good, "max_tokens", 0), "'max_tokens' must be at least 1"},
      {with(good, "max_tokens", 100000), "maximum context length"},
      {with(good, "messages", nullptr), "'messages' is required"},
      {with(good, "messages", "hi"), "'messages' must be a list"},
      {with(good, "messages", nlohmann::json::array()), "'messages' must not be empty"},
      {with(good, "messages", {1}), "'messages[0]' must be an object"},
      {with(good, "messages", {{{"content", "hi"}}}), "'messages[0].role' is required"},
      {with(good, "messages", {{{"role", 1}, {"content", "hi"}}}),
       "'messages[0].role' must be a string"},
      {with(good, "messages", {{{"role", "tool"}, {"content", "hi"}}}),
       "must be 'user', 'assistant' or 'system'"},
      {with(good, "messages", {kUser[0], {{"role", "system"}, {"content", 5}}}),
       "'messages[1].content' must be a string or a list of text blocks"},
      {with(good, "messages", {{{"role", "user"}}}), "'messages[0].content' is required"},
      {with(good, "messages", {{{"role", "user"}, {"content", 5}}}),
       "'messages[0].content' must be a string or a list"},
      {with(good, "messages", user_blocks({"hi"})), "'messages[0].content[0]' must be an object"},
      {with(good, "messages", user_blocks({{{"text", "hi"}}})),
       "'messages[0].content[0].type' is required"},
      {with(good, "messages", user_blocks({{{"type", true}, {"text", "hi"}}})),
       "'messages[0].content[0].type' must be a string"},
      {with(good, "messages", user_blocks({{{"type", "text"}}})),
       "'messages[0].content[0].text' is required"},
      {with(good, "messages", user_blocks({{{"type", "text"}, {"text", 3}}})),
       "'messages[0].content[0].text' must be a string"},
      {with(good, "messages",
            user_blocks({{{"type", "image"}, {"source", nlohmann::json::object()}}})),
       "read text only"},
      {with(good, "messages", user_blocks({{{"type", "document"}}})), "read text only"},
      {with(good, "messages", user_blocks({{{"type", "video"}}})), "has type 'video'"},
      {with(good, "messages",
            user_blocks({{{"type", "tool_use"},
                          {"id", "x"},
                          {"name", "f"},
                          {"input", nlohmann::json::object()}}})),
       "has type 'tool_use'"},
      {with(good, "messages",
            user_blocks({{{"type", "tool_result"}, {"tool_use_id", "nope"}, {"content", "x"}}})),
       "which no earlier tool_use block has"},
      {with(good, "messages", user_blocks({{{"type", "tool_result"}, {"content", "x"}}})),
       "'messages[0].content[0].tool_use_id' is required"},
      {with(good, "messages",
            {call_turn,
             user_blocks({{{"type", "tool_result"}, {"tool_use_id", "t1"}, {"content", 7}}})[0]}),
       "'messages[1].content[0].content' must be a string or a list of text blocks"},
      {with(good, "messages",
            {call_turn, user_blocks({{{"type", "tool_result"},
                                      {"tool_use_id", "t1"},
                                      {"content", {{{"type", "image"}}}}}})[0]}),
       "read text only"},
      {with(good, "messages",
            {call_turn,
             user_blocks(
                 {{{"type", "tool_result"}, {"tool_use_id", "t1"}, {"is_error", "yes"}}})[0]}),
       "is_error' must be a boolean"},
      {with(good, "messages",
            {{{"role", "assistant"},
              {"content",
               {{{"type", "tool_use"}, {"name", "f"}, {"input", nlohmann::json::object()}}}}},
             kUser[0]}),
       "'messages[0].content[0].id' is required"},
      {with(good, "messages",
            {{{"role", "assistant"},
              {"content", {{{"type", "tool_use"}, {"id", "a"}, {"name", "f"}, {"input", "{}"}}}}},
             kUser[0]}),
       "'messages[0].content[0].input' must be an object"},
      {with(good, "messages",
            {{{"role", "assistant"}, {"content", {{{"type", "thinking"}}}}}, kUser[0]}),
       "'messages[0].content[0].thinking' is required"},
      {with(good, "messages",
            {{{"role", "assistant"}, {"content", {{{"type", "tool_result"}}}}}, kUser[0]}),
       "has type 'tool_result'"},
      {with(good, "messages", {kUser[0], {{"role", "assistant"}, {"content", "Sure"}}}),
       "does not continue a final assistant message"},
      {with(good, "system", 5), "'system' must be a string or a list of text blocks"},
      {with(good, "system", {{{"type", "image"}}}), "read text only"},
      {with(good, "system", {{{"type", "text"}, {"text", nullptr}}}),
       "'system[0].text' is required"},
      {with(good, "temperature", "hot"), "'temperature' must be a number"},
      {with(good, "temperature", -1), "temperature"},
      {with(good, "top_p", 2), "top_p"},
      {with(good, "top_k", "5"), "'top_k' must be an integer"},
      {with(good, "stop_sequences", "stop"), "'stop_sequences' must be a list of strings"},
      {with(good, "stop_sequences", {1}), "'stop_sequences' must be a string or a list of strings"},
      {with(good, "stop_sequences", {""}), "must not hold empty strings"},
      {with(good, "stream", "yes"), "'stream' must be a boolean"},
      {with(good, "tools", {{"name", "x"}}), "'tools' must be a list"},
      {with(good, "tools", {"x"}), "'tools[0]' must be an object"},
      {with(good, "tools", {{{"input_schema", weather_parameters()}}}),
       "'tools[0].name' is required"},
      {with(good, "tools", {{{"name", "f"}}}), "'tools[0].input_schema' is required"},
      {with(good, "tools", {{{"name", "f"}, {"input_schema", "{}"}}}),
       "'tools[0].input_schema' must be an object"},
      {with(good, "tools",
            {{{"name", "f"}, {"description", 1}, {"input_schema", weather_parameters()}}}),
       "'tools[0].description' must be a string"},
      {with(good, "tools", {{{"type", "web_search_20250305"}, {"name", "web_search"}}}),
       "server tool 'web_search_20250305'"},
      {with(good, "tool_choice", {{"type", "auto"}}), "'tool_choice' needs 'tools'"},
      {with(with(good, "tools", {weather_tool()}), "tool_choice", "auto"),
       "'tool_choice' must be an object"},
      {with(with(good, "tools", {weather_tool()}), "tool_choice", {{"type", "function"}}),
       "'tool_choice.type' must be 'auto', 'any', 'tool' or 'none'"},
      {with(with(good, "tools", {weather_tool()}), "tool_choice", {{"type", "tool"}}),
       "'tool_choice.name' is required"},
      {with(with(good, "tools", {weather_tool()}), "tool_choice",
            {{"type", "tool"}, {"name", "nope"}}),
       "which is not in 'tools'"},
      {with(with(good, "tools", {weather_tool()}), "tool_choice",
            {{"type", "any"}, {"disable_parallel_tool_use", 1}}),
       "disable_parallel_tool_use' must be a boolean"},
      {with(with(good, "tools", nlohmann::json::array()), "tool_choice", {{"type", "any"}}),
       "needs at least one tool"},
      {with(good, "thinking", true), "'thinking' must be an object"},
      {with(good, "thinking", {{"type", "enabled"}}), "'thinking.budget_tokens' is required"},
      {with(good, "thinking", {{"type", "enabled"}, {"budget_tokens", 100}}), "at least 1024"},
      {with(good, "thinking", {{"type", "enabled"}, {"budget_tokens", 2048}}),
       "less than 'max_tokens'"},
      {with(good, "thinking", {{"type", "on"}}),
       "'thinking.type' must be 'enabled', 'adaptive' or 'disabled'"},
      {with(good, "metadata", "x"), "'metadata' must be an object"},
      {with(good, "metadata", {{"user_id", 5}}), "'metadata.user_id' must be a string"},
  };
  for (const auto& [body, says] : cases) expect_invalid(body, says);
  // A body that is not JSON, or not an object, is refused in the same shape.
  const httplib::Result broken = post("/v1/messages", std::string("{\"max_tokens\": "));
  ASSERT_TRUE(broken);
  EXPECT_EQ(broken->status, 400);
  EXPECT_EQ(nlohmann::json::parse(broken->body)["error"]["type"], "invalid_request_error");
  expect_invalid(nlohmann::json::array({1}), "must be a JSON object");
}

}  // namespace
}  // namespace mlaserve::server::testing
