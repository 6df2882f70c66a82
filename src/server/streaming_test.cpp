// Server-sent event streams of the OpenAI routes: chunk shapes, [DONE], usage, UTF-8 and
// stop strings that span chunks.
#include <gmock/gmock.h>

#include <functional>
#include <set>

#include "server/server_test_util.h"

namespace mlaserve::server::testing {
namespace {

class StreamingTest : public ServerTest {
 protected:
  std::vector<nlohmann::json> stream(const std::string& path, nlohmann::json body) {
    body["stream"] = true;
    const httplib::Result result = post(path, body);
    if (!result) {
      ADD_FAILURE() << "no response";
      return {};
    }
    EXPECT_EQ(result->status, 200) << result->body;
    EXPECT_EQ(result->get_header_value("Content-Type"), "text/event-stream");
    return sse_json_events(result->body);
  }

  // Concatenates a field of the first choice over all chunks that have one.
  static std::string joined(const std::vector<nlohmann::json>& events,
                            const std::function<std::string(const nlohmann::json&)>& piece) {
    std::string text;
    for (const nlohmann::json& event : events) {
      if (!event["choices"].empty()) text += piece(event["choices"][0]);
    }
    return text;
  }
};

TEST_F(StreamingTest, CompletionChunksEndWithFinishReasonAndDone) {
  script({id_of("Ġthe"), id_of("re"), id_of("Ġa")});
  const std::vector<nlohmann::json> events =
      stream("/v1/completions", {{"prompt", "Hello"}, {"max_tokens", 3}});
  ASSERT_FALSE(events.empty());
  for (size_t i = 0; i < events.size(); ++i) {
    EXPECT_EQ(events[i]["object"], "text_completion");
    EXPECT_EQ(events[i]["id"], events[0]["id"]);
    EXPECT_FALSE(events[i].contains("usage"));
    const bool last = i + 1 == events.size();
    EXPECT_EQ(events[i]["choices"][0]["finish_reason"],
              last ? nlohmann::json("length") : nlohmann::json(nullptr));
  }
  EXPECT_EQ(joined(events, [](const nlohmann::json& c) { return c["text"].get<std::string>(); }),
            " there a");
}

TEST_F(StreamingTest, IncludeUsageAddsAFinalUsageChunk) {
  script({id_of("Ġthe"), id_of("re")});
  const std::vector<nlohmann::json> events = stream(
      "/v1/completions",
      {{"prompt", "Hello"}, {"max_tokens", 2}, {"stream_options", {{"include_usage", true}}}});
  ASSERT_GE(events.size(), 2u);
  const nlohmann::json& last = events.back();
  EXPECT_TRUE(last["choices"].empty());
  EXPECT_EQ(last["usage"]["completion_tokens"], 2);
  EXPECT_EQ(last["usage"]["prompt_tokens"], tokenizer().encode("Hello", true).size());
  for (size_t i = 0; i + 1 < events.size(); ++i) EXPECT_TRUE(events[i]["usage"].is_null());
}

TEST_F(StreamingTest, ChatStreamStartsWithTheRoleAndEndsWithFinishReason) {
  script({id_of("Ġthe"), id_of("re"), *tokenizer().eos_id()});
  const std::vector<nlohmann::json> events =
      stream("/v1/chat/completions", {{"messages", {{{"role", "user"}, {"content", "Hello"}}}},
                                      {"stream_options", {{"include_usage", true}}}});
  ASSERT_GE(events.size(), 3u);
  EXPECT_EQ(events[0]["object"], "chat.completion.chunk");
  EXPECT_EQ(events[0]["choices"][0]["delta"],
            nlohmann::json({{"role", "assistant"}, {"content", ""}}));
  const nlohmann::json& finished = events[events.size() - 2]["choices"][0];
  EXPECT_EQ(finished["finish_reason"], "stop");
  EXPECT_EQ(
      joined(events,
             [](const nlohmann::json& c) { return c["delta"].value("content", std::string()); }),
      " there");
  EXPECT_EQ(events.back()["usage"]["completion_tokens"], 3);
}

TEST_F(StreamingTest, NeverSendsHalfACharacter) {
  // "é" is the two byte tokens C3 A9, "日" the three E6 97 A5.
  std::vector<int32_t> output;
  for (const unsigned char byte : std::string("é日!")) {
    for (int32_t id = 0; id < 259; ++id) {  // the single-byte tokens come first
      const std::string_view bytes = tokenizer().id_to_bytes(id);
      if (bytes.size() == 1 && static_cast<unsigned char>(bytes[0]) == byte) {
        output.push_back(id);
        break;
      }
    }
  }
  ASSERT_EQ(output.size(), 6u);
  script(output);
  const std::vector<nlohmann::json> events =
      stream("/v1/completions", {{"prompt", "Hello"}, {"max_tokens", 6}});
  std::string text;
  for (const nlohmann::json& event : events) {
    const std::string piece = event["choices"][0]["text"];
    EXPECT_EQ(piece.find("\xEF\xBF\xBD"), std::string::npos) << "U+FFFD in a chunk";
    text += piece;
  }
  EXPECT_EQ(text, "é日!");
}

TEST_F(StreamingTest, StopStringAcrossChunksIsNeverSent) {
  // Slow steps so that each token goes out in its own chunk.
  FakeEngine::Options slow;
  slow.step_interval = std::chrono::milliseconds(20);
  start({}, slow);
  script({id_of("Ġt"), id_of("he"), id_of("re"), id_of("Ġa")});
  const std::vector<nlohmann::json> events =
      stream("/v1/completions", {{"prompt", "Hello"}, {"max_tokens", 10}, {"stop", "there"}});
  std::string text;
  for (const nlohmann::json& event : events) {
    text += event["choices"][0]["text"].get<std::string>();
    EXPECT_EQ(event["choices"][0]["text"].get<std::string>().find('t'), std::string::npos)
        << "a chunk sent part of the stop string";
  }
  EXPECT_EQ(text, " ");
  EXPECT_EQ(events.back()["choices"][0]["finish_reason"], "stop");
  EXPECT_TRUE(engine().wait_for_abort(std::chrono::seconds(5)).has_value());
}

TEST_F(StreamingTest, NChoicesStreamUnderTheirIndices) {
  const std::vector<nlohmann::json> events = stream(
      "/v1/chat/completions",
      {{"messages", {{{"role", "user"}, {"content", "Hello"}}}}, {"max_tokens", 2}, {"n", 2}});
  std::set<int> finished;
  for (const nlohmann::json& event : events) {
    const nlohmann::json& choice = event["choices"][0];
    if (!choice["finish_reason"].is_null()) finished.insert(choice["index"].get<int>());
  }
  EXPECT_EQ(finished, (std::set<int>{0, 1}));
}

TEST_F(StreamingTest, StreamedLogprobsCoverEveryToken) {
  script({id_of("Ġthe"), id_of("re"), id_of("Ġa")});
  const std::vector<nlohmann::json> events =
      stream("/v1/chat/completions", {{"messages", {{{"role", "user"}, {"content", "Hello"}}}},
                                      {"max_tokens", 3},
                                      {"logprobs", true}});
  std::vector<float> logprobs;
  for (const nlohmann::json& event : events) {
    const nlohmann::json& choice = event["choices"][0];
    if (choice["logprobs"].is_null()) continue;
    for (const nlohmann::json& token : choice["logprobs"]["content"]) {
      logprobs.push_back(token["logprob"]);
    }
  }
  EXPECT_EQ(logprobs, (std::vector<float>{-0.25f, -0.5f, -0.75f}));
}

TEST_F(StreamingTest, EngineErrorMidStreamSendsAnErrorEvent) {
  engine().fail_prompts_containing(777, /*after_tokens=*/2);
  script({id_of("Ġthe"), id_of("re"), id_of("Ġa")});
  const std::vector<nlohmann::json> events =
      stream("/v1/completions", {{"prompt", {1, 777}}, {"max_tokens", 10}});
  ASSERT_GE(events.size(), 2u);
  const nlohmann::json& error = events.back()["error"];
  EXPECT_EQ(error["message"], "fake engine failure");
  EXPECT_EQ(error["type"], "server_error");
  std::string text;
  for (size_t i = 0; i + 1 < events.size(); ++i) text += events[i]["choices"][0]["text"];
  EXPECT_EQ(text, " there");
}

TEST_F(StreamingTest, ATokenOutsideTheVocabularyEndsTheStreamWithAnError) {
  FakeEngine::Options slow;  // the first token starts the stream, the bad one comes later
  slow.step_interval = std::chrono::milliseconds(20);
  start({}, slow);
  script({id_of("Ġthe"), 999999, id_of("re")});
  const httplib::Result result = post(
      "/v1/completions", nlohmann::json{{"prompt", "Hello"}, {"max_tokens", 10}, {"stream", true}});
  ASSERT_TRUE(result);
  EXPECT_EQ(result->status, 200);
  const std::vector<nlohmann::json> events = sse_json_events(result->body);
  ASSERT_FALSE(events.empty());
  EXPECT_EQ(events.back()["error"]["type"], "server_error");
  EXPECT_TRUE(engine().wait_for_abort(std::chrono::seconds(5)).has_value());
  EXPECT_EQ(get("/health")->status, 200);
}

}  // namespace
}  // namespace mlaserve::server::testing
