// A real HttpServer on 127.0.0.1 (a free port) over the FakeEngine and the brown-tiny
// tokenizer, with helpers to call it; server-sent events are read with tests/support's parser.
#pragma once

#include <gtest/gtest.h>
#include <httplib.h>

#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "server/fake_engine_test_util.h"
#include "server/http_server.h"
#include "support/sse.h"
#include "support/tokenizers.h"
#include "tokenizer/tokenizer.h"

namespace mlaserve::server::testing {

using mlaserve::testing::brown_tiny_tokenizer;
using mlaserve::testing::sse_json_events;

// The id of a vocabulary entry such as "Ġthe" (fails the test if absent).
inline int32_t id_of(std::string_view token) {
  const std::optional<int32_t> id = brown_tiny_tokenizer().token_to_id(token);
  EXPECT_TRUE(id.has_value()) << token;
  return id.value_or(-1);
}

class ServerTest : public ::testing::Test {
 protected:
  static constexpr const char* kModelName = "brown-tiny";
  static constexpr const char* kModelPath = "/models/brown-tiny";

  void SetUp() override { start({}, {}); }
  void TearDown() override { stop(); }

  // Restarts with these options (host, port and model names are filled in), serving `served`
  // (brown-tiny's tokenizer with another chat format, say) when given.
  void start(ServerOptions options, FakeEngine::Options engine_options,
             std::optional<tokenizer::Tokenizer> served = std::nullopt) {
    stop();
    options.host = "127.0.0.1";
    options.port = 0;
    if (options.model_name.empty()) options.model_name = kModelName;
    options.model_path = kModelPath;
    options.tokenizer_path = mlaserve::testing::kBrownTinyTokenizerDir;
    engine_options.vocab_size = tokenizer().vocab_size();
    engine_ = std::make_unique<FakeEngine>(engine_options);
    served_ = std::move(served);
    server_ = std::make_unique<HttpServer>(options, *engine_, served_ ? *served_ : tokenizer());
    server_->start();
  }

  // Walks the constraint of the last submitted request along `text`'s tokens: true if each was
  // allowed in turn. `complete` tells whether the walk ended where the output may end.
  bool constraint_allows(const std::string& text, bool* complete = nullptr) {
    const auto& submitted = engine().submitted();
    if (submitted.empty() || !submitted.back().constraint) {
      ADD_FAILURE() << "the request has no constraint";
      return false;
    }
    const std::shared_ptr<sched::TokenConstraint> constraint = submitted.back().constraint;
    std::vector<uint64_t> allowed(static_cast<size_t>((tokenizer().vocab_size() + 63) / 64));
    for (int32_t token : tokenizer().encode(text, /*add_special_tokens=*/false)) {
      constraint->fill_allowed(allowed);
      if (!((allowed[static_cast<size_t>(token / 64)] >> (token % 64)) & 1u)) return false;
      constraint->accept(token);
    }
    if (complete) *complete = constraint->can_end();
    return true;
  }

  void stop() {
    if (server_) server_->stop();
    server_.reset();
    engine_.reset();
  }

  // Stops the server but keeps the engine, to inspect what it saw.
  void stop_server() {
    if (server_) server_->stop();
  }
  int port() const { return server_->port(); }

  static const tokenizer::Tokenizer& tokenizer() { return brown_tiny_tokenizer(); }
  FakeEngine& engine() { return *engine_; }

  httplib::Client client() const {
    httplib::Client client("127.0.0.1", server_->port());
    client.set_read_timeout(10, 0);
    client.set_connection_timeout(5, 0);
    return client;
  }

  httplib::Result post(const std::string& path, const std::string& body,
                       const httplib::Headers& headers = {}) const {
    return client().Post(path, headers, body, "application/json");
  }
  httplib::Result post(const std::string& path, const nlohmann::json& body,
                       const httplib::Headers& headers = {}) const {
    return post(path, body.dump(), headers);
  }
  httplib::Result get(const std::string& path, const httplib::Headers& headers = {}) const {
    return client().Get(path, headers);
  }

  // POSTs and expects `status` with a JSON body; returns the body.
  nlohmann::json post_json(const std::string& path, const nlohmann::json& body,
                           int status = 200) const {
    const httplib::Result result = post(path, body);
    if (!result) {
      ADD_FAILURE() << "no response from " << path;
      return nullptr;
    }
    EXPECT_EQ(result->status, status) << result->body;
    return nlohmann::json::parse(result->body);
  }

  // The fake engine continues every prompt with `tokens` (then stalls).
  void script(std::vector<int32_t> tokens) {
    engine().set_script([tokens](const sched::GenerationRequest&) { return tokens; });
  }

  std::string decode(const std::vector<int32_t>& ids) const {
    return tokenizer().decode(ids, /*skip_special_tokens=*/true);
  }

 private:
  std::unique_ptr<FakeEngine> engine_;
  std::optional<tokenizer::Tokenizer> served_;
  std::unique_ptr<HttpServer> server_;
};

}  // namespace mlaserve::server::testing
