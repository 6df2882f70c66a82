// Every kind of client and engine error gets OpenAI's error shape and the right status, and
// the server keeps serving after each.
#include <arpa/inet.h>
#include <gmock/gmock.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>

#include "server/server_test_util.h"

namespace mlaserve::server::testing {
namespace {

using ::testing::HasSubstr;

class ErrorsTest : public ServerTest {
 protected:
  // Expects `status` with an OpenAI error body, then checks that a good request still works.
  nlohmann::json expect_error(const httplib::Result& result, int status, const std::string& type,
                              const nlohmann::json& param = nullptr) {
    if (!result) {
      ADD_FAILURE() << "no response";
      return nullptr;
    }
    EXPECT_EQ(result->status, status) << result->body;
    EXPECT_EQ(result->get_header_value("Content-Type"), "application/json");
    const nlohmann::json body = nlohmann::json::parse(result->body);
    const nlohmann::json& error = body["error"];
    EXPECT_TRUE(error["message"].is_string() && !error["message"].get<std::string>().empty());
    EXPECT_EQ(error["type"], type);
    EXPECT_EQ(error["param"], param);
    EXPECT_TRUE(error.contains("code"));
    expect_still_serving();
    return error;
  }

  nlohmann::json expect_invalid(const nlohmann::json& body, const nlohmann::json& param,
                                const std::string& path = "/v1/completions") {
    return expect_error(post(path, body), 400, "invalid_request_error", param);
  }

  void expect_still_serving() {
    const httplib::Result good =
        post("/v1/completions", nlohmann::json{{"prompt", "Hello"}, {"max_tokens", 1}});
    ASSERT_TRUE(good);
    EXPECT_EQ(good->status, 200) << good->body;
  }

  static nlohmann::json chat(nlohmann::json extra) {
    extra["messages"] = {{{"role", "user"}, {"content", "Hello"}}};
    return extra;
  }
};

TEST_F(ErrorsTest, MalformedJson) {
  const nlohmann::json error = expect_error(post("/v1/completions", std::string("{\"prompt\": ")),
                                            400, "invalid_request_error");
  EXPECT_THAT(error["message"].get<std::string>(), HasSubstr("not valid JSON"));
  expect_error(post("/generate", std::string("[1, 2]")), 400, "invalid_request_error");
}

// A body the parser cannot represent is the client's error too, on every endpoint with a body.
TEST_F(ErrorsTest, UnrepresentableJsonIs400) {
  for (const std::string path : {"/v1/completions", "/v1/chat/completions", "/generate",
                                 "/tokenize", "/detokenize", "/abort_request"}) {
    SCOPED_TRACE(path);
    for (const std::string number : {"1e400", "-1e400"}) {
      const nlohmann::json error =
          expect_error(post(path, "{\"prompt\": \"Hi\", \"temperature\": " + number + "}"), 400,
                       "invalid_request_error");
      EXPECT_THAT(error["message"].get<std::string>(), HasSubstr("number overflow"));
    }
  }
}

// Deep enough to overflow a thread's stack if anything recursed once per level.
TEST_F(ErrorsTest, DeeplyNestedBodyIs400) {
  const size_t depth = 1'000'000;
  const std::string nested = std::string(depth, '[') + std::string(depth, ']');
  const nlohmann::json error =
      expect_error(post("/v1/completions", "{\"prompt\": \"Hi\", \"temperature\": " + nested + "}"),
                   400, "invalid_request_error");
  EXPECT_THAT(error["message"].get<std::string>(), HasSubstr("deeper than 128 levels"));
  expect_error(post("/generate", nested), 400, "invalid_request_error");
  // Nesting well within the limit is still read (and is then only the wrong type).
  const std::string shallow = std::string(100, '[') + std::string(100, ']');
  expect_error(post("/v1/completions", "{\"prompt\": \"Hi\", \"temperature\": " + shallow + "}"),
               400, "invalid_request_error", "temperature");
}

TEST_F(ErrorsTest, WrongTypes) {
  const nlohmann::json error =
      expect_invalid({{"prompt", "Hi"}, {"max_tokens", "ten"}}, "max_tokens");
  EXPECT_EQ(error["message"], "'max_tokens' must be an integer, got \"ten\"");
  expect_invalid({{"prompt", "Hi"}, {"max_tokens", 2.5}}, "max_tokens");
  expect_invalid({{"prompt", "Hi"}, {"temperature", "hot"}}, "temperature");
  expect_invalid({{"prompt", "Hi"}, {"stream", "yes"}}, "stream");
  expect_invalid({{"prompt", "Hi"}, {"stop", 5}}, "stop");
  expect_invalid({{"prompt", {"Hi", 5}}}, "prompt");
  expect_invalid({{"text", "Hi"}, {"sampling_params", {{"max_new_tokens", "x"}}}}, "max_new_tokens",
                 "/generate");
}

TEST_F(ErrorsTest, OutOfRangeValues) {
  expect_invalid({{"prompt", "Hi"}, {"max_tokens", -1}}, "max_tokens");
  expect_invalid({{"prompt", "Hi"}, {"max_tokens", 0}}, "max_tokens");
  const nlohmann::json temperature =
      expect_invalid({{"prompt", "Hi"}, {"temperature", -0.5}}, "temperature");
  EXPECT_THAT(temperature["message"].get<std::string>(), HasSubstr("-0.5"));
  expect_invalid({{"prompt", "Hi"}, {"top_p", 1.5}}, "top_p");
  expect_invalid({{"prompt", "Hi"}, {"top_p", 0}}, "top_p");
  expect_invalid({{"prompt", "Hi"}, {"min_p", 2}}, "min_p");
  expect_invalid({{"prompt", "Hi"}, {"top_k", -2}}, "top_k");
  expect_invalid({{"prompt", "Hi"}, {"presence_penalty", 3}}, "presence_penalty");
  expect_invalid({{"prompt", "Hi"}, {"n", 0}}, "n");
  expect_invalid({{"prompt", "Hi"}, {"logprobs", 21}}, "logprobs");
  expect_invalid({{"prompt", "Hi"}, {"stop", {""}}}, "stop");
  expect_invalid({{"prompt", "Hi"}, {"stop_token_ids", {-1}}}, "stop_token_ids");
  expect_invalid({{"prompt", {1, 2, 999999}}}, "prompt");
  expect_invalid(chat({{"top_logprobs", 2}}), "top_logprobs", "/v1/chat/completions");
  expect_invalid({{"prompt", "Hi"}, {"stream_options", {{"include_usage", true}}}},
                 "stream_options");
  expect_invalid({{"prompt", "Hi"}, {"logit_bias", 5}}, "logit_bias");
  expect_invalid({{"prompt", "Hi"}, {"logit_bias", {{"abc", 1}}}}, "logit_bias.abc");
  expect_invalid({{"prompt", "Hi"}, {"logit_bias", {{"7x", 1}}}}, "logit_bias.7x");
  expect_invalid({{"prompt", "Hi"}, {"logit_bias", {{"999999", 1}}}}, "logit_bias.999999");
  expect_invalid({{"prompt", "Hi"}, {"logit_bias", {{"5", "x"}}}}, "logit_bias.5");
  expect_invalid({{"prompt", "Hi"}, {"logit_bias", {{"5", 101}}}}, "logit_bias");
  expect_invalid(chat({{"logit_bias", {{"-1", 1}}}}), "logit_bias.-1", "/v1/chat/completions");
  expect_invalid({{"prompt", "Hi"}, {"priority", "high"}}, "priority");
  expect_invalid({{"prompt", "Hi"}, {"priority", 1.5}}, "priority");
  expect_invalid({{"prompt", "Hi"}, {"priority", int64_t{1} << 40}}, "priority");
}

TEST_F(ErrorsTest, EmptyInputs) {
  expect_invalid({{"prompt", ""}}, "prompt");
  expect_invalid({{"prompt", nlohmann::json::array()}}, "prompt");
  expect_invalid({{"prompt", {nlohmann::json::array()}}}, "prompt");
  expect_invalid({{"max_tokens", 1}}, "prompt");
  expect_invalid({{"messages", nlohmann::json::array()}}, "messages", "/v1/chat/completions");
  expect_invalid({{"model", kModelName}}, "messages", "/v1/chat/completions");
  expect_invalid({{"messages", {{{"content", "no role"}}}}}, "messages", "/v1/chat/completions");
  expect_invalid({{"sampling_params", nlohmann::json::object()}}, "input_ids", "/generate");
  expect_invalid({{"text", "Hi"}, {"input_ids", {1}}}, "text", "/generate");
}

TEST_F(ErrorsTest, InvalidUtf8) {
  expect_error(post("/v1/completions", std::string("{\"prompt\": \"caf\xff\"}")), 400,
               "invalid_request_error");
  expect_error(post("/v1/completions", std::string("{\"prompt\": \"\\ud800\"}")), 400,
               "invalid_request_error");
}

TEST_F(ErrorsTest, PromptPlusMaxTokensOverTheContext) {
  const size_t prompt = tokenizer().encode("Hello", true).size();
  const nlohmann::json error = expect_error(
      post("/v1/completions", nlohmann::json{{"prompt", "Hello"}, {"max_tokens", 300}}), 400,
      "invalid_request_error", "max_tokens");
  EXPECT_EQ(error["code"], "context_length_exceeded");
  EXPECT_EQ(error["message"],
            "This model's maximum context length is 256 tokens. However, you requested " +
                std::to_string(prompt + 300) + " tokens (" + std::to_string(prompt) +
                " in the prompt, 300 for the completion). Please reduce the prompt or "
                "'max_tokens'.");
  // Exactly full is fine.
  const httplib::Result full =
      post("/v1/completions",
           nlohmann::json{{"prompt", "Hello"}, {"max_tokens", 256 - static_cast<int64_t>(prompt)}});
  EXPECT_EQ(full->status, 200);
  // A prompt that fills the context leaves no room even for the default.
  const std::vector<int32_t> long_prompt(256, 300);
  std::string words;
  for (int i = 0; i < 300; ++i) words += " a";  // one token each
  const nlohmann::json no_room =
      expect_error(post("/v1/chat/completions",
                        nlohmann::json{{"messages", {{{"role", "user"}, {"content", words}}}}}),
                   400, "invalid_request_error", "prompt");
  EXPECT_THAT(no_room["message"].get<std::string>(), HasSubstr("maximum context length is 256"));
  expect_error(post("/generate", nlohmann::json{{"input_ids", long_prompt}}), 400,
               "invalid_request_error", "prompt");
}

TEST_F(ErrorsTest, UnknownModel) {
  const nlohmann::json error =
      expect_error(post("/v1/completions", nlohmann::json{{"model", "gpt-4"}, {"prompt", "Hi"}}),
                   404, "invalid_request_error", "model");
  EXPECT_EQ(error["code"], "model_not_found");
  EXPECT_THAT(error["message"].get<std::string>(), HasSubstr("gpt-4"));
  expect_error(post("/v1/chat/completions", chat({{"model", "gpt-4"}})), 404,
               "invalid_request_error", "model");
}

TEST_F(ErrorsTest, UnknownRouteAndWrongMethod) {
  const nlohmann::json missing = expect_error(get("/v1/nothing"), 404, "invalid_request_error");
  EXPECT_EQ(missing["message"], "Invalid URL (GET /v1/nothing)");
  const httplib::Result wrong_method = get("/v1/completions");
  ASSERT_TRUE(wrong_method);
  EXPECT_EQ(wrong_method->get_header_value("Allow"), "POST");
  expect_error(wrong_method, 405, "invalid_request_error");
  expect_error(post("/v1/models", std::string("{}")), 405, "invalid_request_error");
  expect_error(client().Delete("/generate"), 405, "invalid_request_error");
}

TEST_F(ErrorsTest, EngineErrorIs500) {
  engine().fail_prompts_containing(777);
  const nlohmann::json error = expect_error(
      post("/v1/completions", nlohmann::json{{"prompt", {1, 777}}}), 500, "server_error");
  EXPECT_EQ(error["message"], "fake engine failure");
  // A stream the engine fails before its first token still gets the status.
  expect_error(post("/v1/completions", nlohmann::json{{"prompt", {1, 777}}, {"stream", true}}), 500,
               "server_error");
  expect_error(post("/generate", nlohmann::json{{"input_ids", {777}}}), 500, "server_error");
}

TEST_F(ErrorsTest, BodyOverTheLimitIs413) {
  ServerOptions options;
  options.max_body_bytes = 4096;
  start(options, {});
  const std::string big = nlohmann::json{{"prompt", std::string(5000, 'a')}}.dump();
  const nlohmann::json error =
      expect_error(post("/v1/completions", big), 413, "invalid_request_error");
  EXPECT_THAT(error["message"].get<std::string>(), HasSubstr("4096"));
  // A chunked upload has no Content-Length for cpp-httplib to check; the routes check it.
  const httplib::Result chunked =
      client().Post("/v1/completions",
                    httplib::ContentProviderWithoutLength([&](size_t, httplib::DataSink& sink) {
                      sink.write(big.data(), big.size());
                      sink.done();
                      return true;
                    }),
                    "application/json");
  expect_error(chunked, 413, "invalid_request_error");
}

// Sends `request` as it is on a new connection and returns what the server answers until it
// closes the connection (the request asks it to), or until a read waits longer than `wait`.
std::string send_raw(int port, const std::string& request, std::chrono::seconds wait) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(static_cast<uint16_t>(port));
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  const timeval timeout{static_cast<time_t>(wait.count()), 0};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof timeout);
  std::string answer;
  if (::connect(fd, reinterpret_cast<const sockaddr*>(&address), sizeof address) == 0 &&
      ::send(fd, request.data(), request.size(), 0) == static_cast<ssize_t>(request.size())) {
    char buffer[4096];
    for (ssize_t got = 0; (got = ::recv(fd, buffer, sizeof buffer, 0)) > 0;)
      answer.append(buffer, static_cast<size_t>(got));
  }
  ::close(fd);
  return answer;
}

// HTTP/1.1: a request with neither Content-Length nor a chunked Transfer-Encoding has no body
// (what `curl -X POST URL` sends); it is answered at once, not after the read timeout.
TEST_F(ErrorsTest, PostWithoutALengthHasNoBody) {
  const auto post_bare = [&](const std::string& path) {
    return send_raw(port(),
                    "POST " + path + " HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n",
                    std::chrono::seconds(5));
  };
  EXPECT_THAT(post_bare("/flush_cache"), ::testing::StartsWith("HTTP/1.1 200"));
  const std::string empty = post_bare("/v1/completions");
  EXPECT_THAT(empty, ::testing::StartsWith("HTTP/1.1 400"));
  EXPECT_THAT(empty, HasSubstr("not valid JSON"));
  EXPECT_THAT(post_bare("/no/such/route"), ::testing::StartsWith("HTTP/1.1 404"));
  expect_still_serving();
}

}  // namespace
}  // namespace mlaserve::server::testing
