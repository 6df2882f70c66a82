// OpenAI's Responses API over the fake engine: the response object and its stream of named
// events, input items rendered exactly as the chat route renders the same conversation,
// function calls and their outputs, tool_choice and text.format constraints, reasoning items,
// max_output_tokens, the stored responses behind previous_response_id, GET and DELETE, and its
// errors (OpenAI's shape, naming the field's path; the server keeps serving after each).
#include <gmock/gmock.h>

#include "server/agent_api_test_util.h"

namespace mlaserve::server::testing {
namespace {

using mlaserve::testing::named_events;
using mlaserve::testing::NamedEvent;
using ::testing::HasSubstr;

nlohmann::json weather_tool() {
  return {{"type", "function"},
          {"name", "get_weather"},
          {"description", "Current weather"},
          {"parameters", weather_parameters()}};
}

class ResponsesTest : public AgentApiTest {
 protected:
  nlohmann::json create(const nlohmann::json& body, int status = 200) {
    return post_json("/v1/responses", body, status);
  }

  std::vector<NamedEvent> stream(nlohmann::json body) {
    body["stream"] = true;
    const httplib::Result result = post("/v1/responses", body);
    EXPECT_TRUE(result && result->status == 200);
    return result ? named_events(result->body) : std::vector<NamedEvent>{};
  }

  // A 400 (or `status`) in OpenAI's shape whose param is `param`.
  void expect_invalid(const nlohmann::json& body, const std::string& param, const std::string& says,
                      int status = 400) {
    const nlohmann::json error = expect_status("/v1/responses", body, status)["error"];
    EXPECT_EQ(error["type"], "invalid_request_error") << body.dump();
    EXPECT_EQ(error["param"], param) << body.dump() << "\n" << error.dump();
    EXPECT_THAT(error["message"].get<std::string>(), HasSubstr(says)) << body.dump();
  }
};

// Output items without their generated ids.
nlohmann::json without_ids(nlohmann::json output) {
  for (nlohmann::json& item : output) item.erase("id");
  return output;
}

TEST_F(ResponsesTest, StringInput) {
  answer("Sunny and warm.");
  const nlohmann::json response =
      create({{"input", "Weather in Paris?"}, {"instructions", "Be brief."}});
  EXPECT_EQ(response["object"], "response");
  EXPECT_THAT(response["id"].get<std::string>(), ::testing::StartsWith("resp_"));
  EXPECT_EQ(response["status"], "completed");
  EXPECT_EQ(response["model"], kModelName);
  EXPECT_EQ(response["instructions"], "Be brief.");
  EXPECT_EQ(response["incomplete_details"], nullptr);
  ASSERT_EQ(response["output"].size(), 1u);
  const nlohmann::json& message = response["output"][0];
  EXPECT_EQ(message["type"], "message");
  EXPECT_EQ(message["role"], "assistant");
  EXPECT_EQ(message["status"], "completed");
  EXPECT_EQ(message["content"][0]["type"], "output_text");
  EXPECT_EQ(message["content"][0]["text"], "Sunny and warm.");
  EXPECT_EQ(response["usage"]["input_tokens"], last_prompt().size());
  EXPECT_EQ(response["usage"]["total_tokens"], response["usage"]["input_tokens"].get<int>() +
                                                   response["usage"]["output_tokens"].get<int>());
  EXPECT_EQ(last_prompt(),
            chat_route_prompt({{"messages",
                                {{{"role", "system"}, {"content", "Be brief."}},
                                 {{"role", "user"}, {"content", "Weather in Paris?"}}}}}));
}

// Message items with parts, a developer message, function_call and function_call_output render
// as the chat route renders the same conversation.
TEST_F(ResponsesTest, ItemsRenderAsTheChatConversation) {
  answer("ok");
  const nlohmann::json arguments = nlohmann::json({{"city", "Paris"}, {"unit", "c"}}).dump();
  create({{"tools", {weather_tool()}},
          {"input",
           {{{"role", "developer"}, {"content", "Be brief."}},
            {{"type", "message"},
             {"role", "user"},
             {"content", {{{"type", "input_text"}, {"text", "Weather in Paris?"}}}}},
            {{"type", "message"},
             {"role", "assistant"},
             {"content", {{{"type", "output_text"}, {"text", "Let me check."}}}}},
            {{"type", "function_call"},
             {"call_id", "call_1"},
             {"name", "get_weather"},
             {"arguments", arguments}},
            {{"type", "function_call_output"}, {"call_id", "call_1"}, {"output", "21 C"}}}}});
  const std::vector<int32_t> prompt = last_prompt();
  EXPECT_EQ(prompt, chat_route_prompt(weather_chat_conversation("call_1", arguments)));
}

TEST_F(ResponsesTest, FunctionCallOutputAndStream) {
  answer("Let me check." + v31_call_text("get_weather", R"({"city": "Paris", "unit": "c"})"));
  const nlohmann::json body = {{"input", "Weather in Paris?"}, {"tools", {weather_tool()}}};
  const nlohmann::json response = create(body);
  ASSERT_EQ(response["output"].size(), 2u) << response.dump();
  EXPECT_EQ(response["output"][0]["content"][0]["text"], "Let me check.");
  const nlohmann::json& call = response["output"][1];
  EXPECT_EQ(call["type"], "function_call");
  EXPECT_EQ(call["name"], "get_weather");
  EXPECT_EQ(call["arguments"], R"({"city": "Paris", "unit": "c"})");
  EXPECT_EQ(call["status"], "completed");
  EXPECT_FALSE(call["call_id"].get<std::string>().empty());

  const std::vector<NamedEvent> events = stream(body);
  ASSERT_GE(events.size(), 3u);
  EXPECT_EQ(events[0].name, "response.created");
  EXPECT_EQ(events[0].data["response"]["status"], "in_progress");
  EXPECT_EQ(events[1].name, "response.in_progress");
  EXPECT_EQ(events.back().name, "response.completed");
  std::string text, arguments;
  for (size_t i = 0; i < events.size(); ++i) {
    EXPECT_EQ(events[i].data["sequence_number"], i);
    if (events[i].name == "response.output_text.delta")
      text += events[i].data["delta"].get<std::string>();
    if (events[i].name == "response.function_call_arguments.delta")
      arguments += events[i].data["delta"].get<std::string>();
  }
  EXPECT_EQ(text, "Let me check.");
  EXPECT_EQ(arguments, call["arguments"]);
  nlohmann::json final_output = events.back().data["response"]["output"];
  final_output[1]["call_id"] = call["call_id"];
  EXPECT_EQ(without_ids(final_output), without_ids(response["output"]));
  // Each item's output_item.done holds the item as the final response does.
  std::vector<nlohmann::json> done;
  for (const NamedEvent& event : events) {
    if (event.name == "response.output_item.done") done.push_back(event.data["item"]);
  }
  ASSERT_EQ(done.size(), 2u);
  EXPECT_EQ(done[0], events.back().data["response"]["output"][0]);
}

TEST_F(ResponsesTest, ReasoningItem) {
  answer("Paris is in France.</think>Sunny.");
  const nlohmann::json body = {{"input", "Weather in Paris?"}, {"reasoning", {{"effort", "high"}}}};
  const nlohmann::json response = create(body);
  ASSERT_EQ(response["output"].size(), 2u) << response.dump();
  EXPECT_EQ(response["output"][0]["type"], "reasoning");
  EXPECT_EQ(response["output"][0]["content"][0]["text"], "Paris is in France.");
  EXPECT_EQ(response["output"][1]["content"][0]["text"], "Sunny.");
  const std::vector<NamedEvent> events = stream(body);
  EXPECT_EQ(without_ids(events.back().data["response"]["output"]), without_ids(response["output"]));
}

TEST_F(ResponsesTest, ToolChoiceAndTextFormatConstrain) {
  nlohmann::json body = {
      {"input", "Weather?"}, {"max_output_tokens", 1}, {"tools", {weather_tool()}}};
  body["tool_choice"] = {{"type", "function"}, {"name", "get_weather"}};
  create(body);
  bool complete = false;
  EXPECT_TRUE(constraint_allows(v31_call_text("get_weather", R"({"city": "Rome", "unit": "f"})"),
                                &complete));
  EXPECT_TRUE(complete);
  body["tool_choice"] = "none";
  create(body);
  EXPECT_EQ(engine().submitted().back().constraint, nullptr);
  const nlohmann::json schema = {
      {"type", "object"}, {"properties", {{"n", {{"type", "integer"}}}}}, {"required", {"n"}}};
  create(
      {{"input", "Count"},
       {"max_output_tokens", 1},
       {"text", {{"format", {{"type", "json_schema"}, {"name", "count"}, {"schema", schema}}}}}});
  EXPECT_TRUE(constraint_allows(R"({"n": 3})", &complete));
  EXPECT_TRUE(complete);
  EXPECT_FALSE(constraint_allows(R"({"m": 3})"));
}

// Codex CLI groups function tools in a "namespace": its functions are the request's tools.
TEST_F(ResponsesTest, NamespaceToolsAreTheirFunctions) {
  nlohmann::json body = {
      {"input", "Weather?"},
      {"max_output_tokens", 1},
      {"tools", {{{"type", "namespace"}, {"name", "weather"}, {"tools", {weather_tool()}}}}},
      {"tool_choice", {{"type", "function"}, {"name", "get_weather"}}}};
  create(body);
  EXPECT_TRUE(constraint_allows(v31_call_text("get_weather", R"({"city": "Rome", "unit": "f"})")));
}

TEST_F(ResponsesTest, MaxOutputTokensMakesItIncomplete) {
  answer("Sunny and warm.");
  const nlohmann::json body = {{"input", "Weather?"}, {"max_output_tokens", 2}};
  const nlohmann::json response = create(body);
  EXPECT_EQ(response["status"], "incomplete");
  EXPECT_EQ(response["incomplete_details"]["reason"], "max_output_tokens");
  EXPECT_EQ(response["output"][0]["status"], "incomplete");
  EXPECT_EQ(response["usage"]["output_tokens"], 2);
  const std::vector<NamedEvent> events = stream(body);
  EXPECT_EQ(events.back().name, "response.incomplete");
  EXPECT_EQ(events.back().data["response"]["incomplete_details"]["reason"], "max_output_tokens");
}

TEST_F(ResponsesTest, StoredResponsesContinueGetAndDelete) {
  answer("Sunny.");
  const nlohmann::json first =
      create({{"input", "Weather in Paris?"}, {"instructions", "Be brief."}});
  const std::string id = first["id"];
  EXPECT_EQ(post_json("/v1/responses", {{"input", "x"}, {"max_output_tokens", 1}})["store"], true);
  const httplib::Result got = get("/v1/responses/" + id);
  ASSERT_TRUE(got);
  EXPECT_EQ(got->status, 200);
  EXPECT_EQ(nlohmann::json::parse(got->body), first);
  // The continuation renders the stored conversation (not its instructions) and the new input.
  create({{"input", "And tomorrow?"}, {"previous_response_id", id}});
  EXPECT_EQ(last_prompt(),
            chat_route_prompt({{"messages",
                                {{{"role", "user"}, {"content", "Weather in Paris?"}},
                                 {{"role", "assistant"}, {"content", "Sunny."}},
                                 {{"role", "user"}, {"content", "And tomorrow?"}}}}}));
  // Its input as items: newest first by default, in pages.
  const nlohmann::json items =
      nlohmann::json::parse(get("/v1/responses/" + id + "/input_items")->body);
  EXPECT_EQ(items["object"], "list");
  ASSERT_EQ(items["data"].size(), 1u);
  EXPECT_EQ(items["data"][0]["content"][0]["text"], "Weather in Paris?");
  EXPECT_EQ(items["has_more"], false);
  const nlohmann::json two = create(
      {{"input", {{{"role", "user"}, {"content", "a"}}, {{"role", "user"}, {"content", "b"}}}}});
  const std::string two_id = two["id"];
  const nlohmann::json newest =
      nlohmann::json::parse(get("/v1/responses/" + two_id + "/input_items?limit=1")->body);
  ASSERT_EQ(newest["data"].size(), 1u);
  EXPECT_EQ(newest["data"][0]["content"], "b");
  EXPECT_EQ(newest["has_more"], true);
  const nlohmann::json rest =
      nlohmann::json::parse(get("/v1/responses/" + two_id + "/input_items?limit=1&after=" +
                                newest["last_id"].get<std::string>())
                                ->body);
  EXPECT_EQ(rest["data"][0]["content"], "a");
  EXPECT_EQ(rest["has_more"], false);
  EXPECT_EQ(
      nlohmann::json::parse(
          get("/v1/responses/" + two_id + "/input_items?order=asc")->body)["data"][0]["content"],
      "a");
  EXPECT_EQ(get("/v1/responses/" + two_id + "/input_items?limit=0")->status, 400);
  EXPECT_EQ(get("/v1/responses/resp_nope/input_items")->status, 404);
  const nlohmann::json unstored = create({{"input", "Hi"}, {"store", false}});
  EXPECT_EQ(get("/v1/responses/" + unstored["id"].get<std::string>())->status, 404);
  const httplib::Result deleted = client().Delete("/v1/responses/" + id);
  ASSERT_TRUE(deleted);
  EXPECT_EQ(deleted->status, 200);
  EXPECT_EQ(nlohmann::json::parse(deleted->body)["deleted"], true);
  const httplib::Result gone = get("/v1/responses/" + id);
  EXPECT_EQ(gone->status, 404);
  EXPECT_EQ(nlohmann::json::parse(gone->body)["error"]["code"], "response_not_found");
  EXPECT_EQ(client().Delete("/v1/responses/" + id)->status, 404);
  const httplib::Result wrong_method = post("/v1/responses/" + id, nlohmann::json::object());
  ASSERT_TRUE(wrong_method);
  EXPECT_EQ(wrong_method->status, 405);
  EXPECT_EQ(wrong_method->get_header_value("Allow"), "DELETE, GET");
  expect_invalid({{"input", "Hi"}, {"previous_response_id", id}}, "previous_response_id",
                 "not found");
}

nlohmann::json with(nlohmann::json body, const std::string& key, nlohmann::json value) {
  body[key] = std::move(value);
  return body;
}

nlohmann::json input(nlohmann::json item) {
  return {{"input", nlohmann::json::array({std::move(item)})}};
}

struct BadCase {
  nlohmann::json body;
  std::string param;
  std::string says;
};

TEST_F(ResponsesTest, BadRequests) {
  const nlohmann::json good = {{"input", "Hi"}, {"max_output_tokens", 4}};
  const nlohmann::json tools = with(good, "tools", {weather_tool()});
  const nlohmann::json call = {
      {"type", "function_call"}, {"call_id", "c1"}, {"name", "get_weather"}, {"arguments", "{}"}};
  const std::vector<BadCase> cases = {
      {nlohmann::json::object(), "input", "'input' is required"},
      {with(good, "input", 5), "input", "'input' must be a string or a non-empty list"},
      {with(good, "input", nlohmann::json::array()), "input", "non-empty list"},
      {input("hi"), "input[0]", "'input[0]' must be an object"},
      {input({{"role", "user"}}), "input[0].content", "'input[0].content' is required"},
      {input({{"content", "hi"}}), "input[0].role", "'input[0].role' is required"},
      {input({{"role", 3}, {"content", "hi"}}), "input[0].role", "must be a string"},
      {input({{"role", "tool"}, {"content", "hi"}}), "input[0].role",
       "must be 'user', 'assistant', 'system' or 'developer'"},
      {input({{"type", 1}, {"role", "user"}, {"content", "hi"}}), "input[0].type",
       "must be a string"},
      {input({{"type", "item_reference"}, {"id", "x"}}), "input[0].type",
       "has type 'item_reference'"},
      {input({{"role", "user"}, {"content", 1}}), "input[0].content",
       "must be a string or a list of content parts"},
      {input({{"role", "user"}, {"content", {1}}}), "input[0].content[0]", "must be an object"},
      {input({{"role", "user"}, {"content", {{{"text", "hi"}}}}}), "input[0].content[0].type",
       "is required"},
      {input({{"role", "user"}, {"content", {{{"type", "input_image"}, {"image_url", "x"}}}}}),
       "input[0].content[0].type", "text parts"},
      {input({{"role", "user"}, {"content", {{{"type", "output_text"}, {"text", "hi"}}}}}),
       "input[0].content[0].type", "text parts"},
      {input({{"role", "assistant"}, {"content", {{{"type", "input_text"}, {"text", "hi"}}}}}),
       "input[0].content[0].type", "text parts"},
      {input({{"role", "user"}, {"content", {{{"type", "input_text"}, {"text", 5}}}}}),
       "input[0].content[0].text", "must be a string"},
      {input({{"role", "user"}, {"content", {{{"type", "input_text"}}}}}),
       "input[0].content[0].text", "is required"},
      {input({{"type", "function_call"}, {"name", "f"}, {"arguments", "{}"}}), "input[0].call_id",
       "is required"},
      {input({{"type", "function_call"}, {"call_id", "c"}, {"arguments", "{}"}}), "input[0].name",
       "is required"},
      {input({{"type", "function_call"},
              {"call_id", "c"},
              {"name", "f"},
              {"arguments", nlohmann::json::object()}}),
       "input[0].arguments", "must be a string"},
      {input({{"type", "function_call_output"}, {"call_id", "c9"}, {"output", "x"}}),
       "input[0].call_id", "which no earlier function_call has"},
      {{{"input", {call, {{"type", "function_call_output"}, {"call_id", "c1"}}}}},
       "input[1].output",
       "is required"},
      {{{"input", {call, {{"type", "function_call_output"}, {"call_id", "c1"}, {"output", 5}}}}},
       "input[1].output",
       "must be a string or a list"},
      {{{"input", {call, {{"type", "function_call_output"}, {"call_id", 1}, {"output", "x"}}}}},
       "input[1].call_id",
       "must be a string"},
      {input({{"type", "reasoning"}, {"summary", "x"}}), "input[0].summary", "must be a list"},
      {input({{"type", "reasoning"}, {"summary", {{{"type", "summary_text"}, {"text", 1}}}}}),
       "input[0].summary[0].text", "must be a string"},
      {with(good, "instructions", 5), "instructions", "must be a string"},
      {with(good, "max_output_tokens", "4"), "max_output_tokens", "must be an integer"},
      {with(good, "max_output_tokens", 0), "max_output_tokens", "at least 1"},
      {with(good, "max_output_tokens", 100000), "max_output_tokens", "maximum context length"},
      {with(good, "temperature", "x"), "temperature", "must be a number"},
      {with(good, "top_p", 5), "top_p", "top_p"},
      {with(good, "top_logprobs", 99), "top_logprobs", "must be in [0, 20]"},
      {with(good, "stream", 1), "stream", "must be a boolean"},
      {with(good, "store", "yes"), "store", "must be a boolean"},
      {with(good, "previous_response_id", 5), "previous_response_id", "must be a string"},
      {with(good, "metadata", 5), "metadata", "must be an object"},
      {with(good, "user", 5), "user", "must be a string"},
      {with(good, "background", true), "background", "not supported"},
      {with(good, "conversation", "conv_1"), "conversation", "not supported"},
      {with(good, "truncation", "middle"), "truncation", "'disabled' or 'auto'"},
      {with(good, "tools", "x"), "tools", "must be a list"},
      {with(good, "tools", {5}), "tools[0]", "must be an object"},
      {with(good, "tools", {{{"name", "f"}}}), "tools[0].type", "is required"},
      {with(good, "tools", {{{"type", "web_search"}}}), "tools[0].type", "no hosted tools"},
      {with(good, "tools", {{{"type", "function"}}}), "tools[0].name", "is required"},
      {with(good, "tools", {{{"type", "function"}, {"name", "f"}, {"parameters", "x"}}}),
       "tools[0].parameters", "must be an object"},
      {with(good, "tools", {{{"type", "function"}, {"name", "f"}, {"strict", "yes"}}}),
       "tools[0].strict", "must be a boolean"},
      {with(good, "tools", {{{"type", "namespace"}, {"name", "n"}}}), "tools[0].tools",
       "is required"},
      {with(good, "tools", {{{"type", "namespace"}, {"tools", {{{"type", "web_search"}}}}}}),
       "tools[0].tools[0].type", "no hosted tools"},
      {with(good, "tool_choice", "auto"), "tool_choice", "needs 'tools'"},
      {with(tools, "tool_choice", "any"), "tool_choice",
       "must be 'none', 'auto', 'required' or a function"},
      {with(tools, "tool_choice", 5), "tool_choice", "must be an object"},
      {with(tools, "tool_choice", {{"type", "file_search"}}), "tool_choice.type",
       "must be 'function'"},
      {with(tools, "tool_choice", {{"type", "function"}}), "tool_choice.name", "is required"},
      {with(tools, "tool_choice", {{"type", "function"}, {"name", "nope"}}), "tool_choice.name",
       "not in 'tools'"},
      {with(with(good, "tools", nlohmann::json::array()), "tool_choice", "required"), "tool_choice",
       "at least one tool"},
      {with(tools, "parallel_tool_calls", "no"), "parallel_tool_calls", "must be a boolean"},
      {with(good, "text", "json"), "text", "must be an object"},
      {with(good, "text", {{"format", "json"}}), "text.format", "must be an object"},
      {with(good, "text", {{"format", {{"type", "xml"}}}}), "text.format.type",
       "must be 'text', 'json_object' or 'json_schema'"},
      {with(good, "text",
            {{"format", {{"type", "json_schema"}, {"schema", {{"type", "object"}}}}}}),
       "text.format.name", "is required"},
      {with(good, "text", {{"format", {{"type", "json_schema"}, {"name", "x"}}}}),
       "text.format.schema", "is required"},
      {with(good, "text",
            {{"format", {{"type", "json_schema"}, {"name", "x"}, {"schema", {{"type", "nope"}}}}}}),
       "response_format", "type"},
      {with(good, "reasoning", "high"), "reasoning", "must be an object"},
      {with(good, "reasoning", {{"effort", "max"}}), "reasoning.effort", "must be one of"},
      {with(good, "reasoning", {{"effort", 1}}), "reasoning.effort", "must be a string"},
      {with(good, "model", "gpt-x"), "model", "does not exist"},
  };
  for (const BadCase& bad : cases) {
    expect_invalid(bad.body, bad.param, bad.says, bad.param == "model" ? 404 : 400);
  }
}

}  // namespace
}  // namespace mlaserve::server::testing
