// A client that goes away makes the server abort its engine requests, streaming or not; so
// does stopping the server.
#include <gmock/gmock.h>

#include <cstdlib>
#include <future>
#include <optional>
#include <thread>

#include "server/server_test_util.h"

namespace mlaserve::server::testing {
namespace {

class DisconnectTest : public ServerTest {
 protected:
  // An engine that would generate for a long time: 5 ms steps, a huge context.
  void SetUp() override {
    FakeEngine::Options slow;
    slow.step_interval = std::chrono::milliseconds(5);
    slow.context_length = 1'000'000;
    start({}, slow);
  }
};

// On every streaming route (the chat APIs' named-event streams too).
TEST_F(DisconnectTest, ClientLeavingAStreamAbortsTheEngineRequest) {
  const nlohmann::json user = {{{"role", "user"}, {"content", "Hello"}}};
  const std::vector<std::pair<std::string, nlohmann::json>> streams = {
      {"/v1/completions", {{"prompt", "Hello"}, {"max_tokens", 900000}}},
      {"/v1/responses", {{"input", "Hello"}, {"max_output_tokens", 900000}}},
      {"/v1/messages", {{"messages", user}, {"max_tokens", 900000}}}};
  for (const auto& [path, body] : streams) {
    SCOPED_TRACE(path);
    httplib::Request request;
    request.method = "POST";
    request.path = path;
    request.set_header("Content-Type", "application/json");
    nlohmann::json streamed = body;
    streamed["stream"] = true;
    request.body = streamed.dump();
    int chunks = 0;
    request.content_receiver = [&](const char*, size_t, uint64_t, uint64_t) {
      return ++chunks < 3;  // read a few chunks, then hang up
    };
    const httplib::Result result = client().send(request);
    EXPECT_FALSE(result);  // cancelled by the receiver
    EXPECT_EQ(chunks, 3);

    EXPECT_TRUE(engine().wait_for_abort(std::chrono::seconds(5)).has_value());
    EXPECT_TRUE(engine().wait_until_idle(std::chrono::seconds(5)));  // the request ended
    // The server is still serving.
    EXPECT_EQ(get("/health")->status, 200);
  }
}

TEST_F(DisconnectTest, ClientLeavingAWaitingRequestAbortsTheEngineRequest) {
  script({id_of("Ġthe")});  // then stalls: the request never finishes by itself
  httplib::Client impatient = client();
  impatient.set_read_timeout(0, 300'000);
  const httplib::Result result = impatient.Post(
      "/v1/completions", nlohmann::json{{"prompt", "Hello"}, {"max_tokens", 100}}.dump(),
      "application/json");
  EXPECT_FALSE(result);
  EXPECT_EQ(engine().wait_for_abort(std::chrono::seconds(5)), 1u);
  EXPECT_TRUE(engine().wait_until_idle(std::chrono::seconds(5)));
}

TEST_F(DisconnectTest, StoppingTheServerEndsWaitingRequests) {
  script({});  // stalls from the start
  std::optional<httplib::Result> result;
  std::thread waiting([&] {
    result.emplace(
        post("/v1/completions", nlohmann::json{{"prompt", "Hello"}, {"max_tokens", 10}}));
  });
  // Not ASSERT: `waiting` must be joined; stopping the server ends it either way.
  EXPECT_TRUE(engine().wait_for_submitted(1, std::chrono::seconds(30)))
      << "the request never reached the engine";
  // The request never finishes by itself, so a stop that waited for it would never return: any
  // deadline tells the two apart, and one far above a stop's milliseconds cannot flake.
  std::packaged_task<void()> stop([this] { stop_server(); });
  std::future<void> stopped = stop.get_future();
  std::thread stopping(std::move(stop));
  if (stopped.wait_for(std::chrono::seconds(30)) != std::future_status::ready) {
    ADD_FAILURE() << "stopping the server waits for a request that never finishes";
    std::_Exit(EXIT_FAILURE);  // the stop cannot be cancelled, and teardown would hang on it
  }
  stopping.join();
  waiting.join();
  ASSERT_TRUE(result && *result);
  EXPECT_EQ((*result)->status, 503);
  EXPECT_EQ(engine().aborted(), std::vector<uint64_t>{1});
}

}  // namespace
}  // namespace mlaserve::server::testing
