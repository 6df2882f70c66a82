// A client that goes away makes the server abort its engine requests, streaming or not; so
// does stopping the server.
#include <gmock/gmock.h>

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

TEST_F(DisconnectTest, ClientLeavingAStreamAbortsTheEngineRequest) {
  httplib::Request request;
  request.method = "POST";
  request.path = "/v1/completions";
  request.set_header("Content-Type", "application/json");
  request.body =
      nlohmann::json{{"prompt", "Hello"}, {"max_tokens", 900000}, {"stream", true}}.dump();
  int chunks = 0;
  request.content_receiver = [&](const char*, size_t, uint64_t, uint64_t) {
    return ++chunks < 3;  // read a few chunks, then hang up
  };
  const httplib::Result result = client().send(request);
  EXPECT_FALSE(result);  // cancelled by the receiver
  EXPECT_EQ(chunks, 3);

  EXPECT_EQ(engine().wait_for_abort(std::chrono::seconds(5)), 1u);
  EXPECT_TRUE(engine().wait_until_idle(std::chrono::seconds(5)));
  // The server is still serving.
  EXPECT_EQ(get("/health")->status, 200);
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
  while (engine().submitted().empty()) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  const auto before = std::chrono::steady_clock::now();
  stop_server();
  EXPECT_LT(std::chrono::steady_clock::now() - before, std::chrono::seconds(3));
  waiting.join();
  ASSERT_TRUE(result && *result);
  EXPECT_EQ((*result)->status, 503);
  EXPECT_EQ(engine().aborted(), std::vector<uint64_t>{1});
}

}  // namespace
}  // namespace mlaserve::server::testing
