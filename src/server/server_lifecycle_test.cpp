// Binding, API keys and CORS.
#include <gmock/gmock.h>

#include "core/error.h"
#include "server/server_test_util.h"

namespace mlaserve::server::testing {
namespace {

using ::testing::HasSubstr;

class LifecycleTest : public ServerTest {};

TEST_F(LifecycleTest, APortInUseIsAClearError) {
  ServerOptions options;
  options.port = port();
  HttpServer second(options, engine(), tokenizer());
  try {
    second.start();
    FAIL() << "a second server bound port " << port();
  } catch (const Error& error) {
    EXPECT_THAT(error.what(), HasSubstr("127.0.0.1:" + std::to_string(port())));
    EXPECT_THAT(error.what(), HasSubstr("in use"));
  }
  EXPECT_EQ(get("/health")->status, 200);
}

TEST_F(LifecycleTest, ApiKeyIsRequiredWhenSet) {
  ServerOptions options;
  options.api_key = "sesame";
  start(options, {});
  const nlohmann::json body = {{"prompt", "Hello"}, {"max_tokens", 1}};
  const httplib::Result missing = post("/v1/completions", body);
  ASSERT_TRUE(missing);
  EXPECT_EQ(missing->status, 401);
  EXPECT_EQ(nlohmann::json::parse(missing->body)["error"]["code"], "invalid_api_key");
  EXPECT_EQ(post("/v1/completions", body, {{"Authorization", "Bearer wrong"}})->status, 401);
  EXPECT_EQ(post("/v1/completions", body, {{"Authorization", "sesame"}})->status, 401);
  EXPECT_EQ(get("/v1/models")->status, 401);
  EXPECT_EQ(post("/v1/completions", body, {{"Authorization", "Bearer sesame"}})->status, 200);
  EXPECT_EQ(get("/v1/models", {{"Authorization", "Bearer sesame"}})->status, 200);
  // Health checks and metrics scrapers need no key.
  EXPECT_EQ(get("/health")->status, 200);
  EXPECT_EQ(get("/metrics")->status, 200);
}

TEST_F(LifecycleTest, NoApiKeyMeansOpen) {
  EXPECT_EQ(get("/v1/models")->status, 200);
}

TEST_F(LifecycleTest, CorsHeadersOnlyWhenEnabled) {
  EXPECT_FALSE(get("/health")->has_header("Access-Control-Allow-Origin"));
  EXPECT_EQ(client().Options("/v1/completions")->status, 405);
  ServerOptions options;
  options.cors = true;
  start(options, {});
  EXPECT_EQ(get("/health")->get_header_value("Access-Control-Allow-Origin"), "*");
  const httplib::Result preflight = client().Options("/v1/completions");
  ASSERT_TRUE(preflight);
  EXPECT_EQ(preflight->status, 204);
  EXPECT_EQ(preflight->get_header_value("Access-Control-Allow-Origin"), "*");
  EXPECT_THAT(preflight->get_header_value("Access-Control-Allow-Headers"),
              HasSubstr("Authorization"));
}

TEST_F(LifecycleTest, StopIsIdempotent) {
  ASSERT_TRUE(get("/health"));
  stop_server();
  EXPECT_FALSE(get("/health")) << "still answering after stop()";
  EXPECT_NO_THROW(stop_server());  // returns at once: nothing is left to stop
  EXPECT_FALSE(get("/health"));
}

}  // namespace
}  // namespace mlaserve::server::testing
