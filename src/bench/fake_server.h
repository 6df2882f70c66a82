// A fake inference server for the end-to-end tests: SGLang's native /generate and the OpenAI
// completions and chat APIs on 127.0.0.1 (a free port), streaming deterministic chunks with
// controlled delays: the first chunk carries one token after `first_chunk_delay_s`, each later
// one `tokens_per_chunk` tokens `chunk_gap_s` after the previous. Every token is the text
// " the". Header-only: it is test code, kept out of the library.
#pragma once

#include <httplib.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

namespace mlaserve::bench::testing {

struct FakeServerConfig {
  double first_chunk_delay_s = 0.03;
  double chunk_gap_s = 0.02;
  int64_t tokens_per_chunk = 2;
  // Request k (0-based in arrival order; 0 is bench-serving's warm-up) answers HTTP 500 when
  // k % fail_every == fail_every - 1.
  int64_t fail_every = 0;
  // OpenAI APIs: put the running usage.completion_tokens in every chunk (as SGLang's
  // stream_options.continuous_usage_stats does); otherwise only the final usage chunk has it.
  bool usage_in_every_chunk = false;
  // Requests after a /flush_cache wait this long before their first chunk.
  double stall_after_flush_s = 0.0;
  std::string tokenizer_path = "models/brown-tiny";
};

class FakeServer {
 public:
  explicit FakeServer(FakeServerConfig config) : config_(std::move(config)) {
    server_.new_task_queue = [] { return new httplib::ThreadPool(32); };
    server_.Get("/get_model_info", [this](const httplib::Request&, httplib::Response& res) {
      const nlohmann::json info = {{"model_path", config_.tokenizer_path},
                                   {"tokenizer_path", config_.tokenizer_path},
                                   {"is_generation", true}};
      res.set_content(info.dump(), "application/json");
    });
    server_.Get("/v1/models", [](const httplib::Request&, httplib::Response& res) {
      res.set_content(R"({"object":"list","data":[{"id":"fake-model","object":"model"}]})",
                      "application/json");
    });
    server_.Post("/flush_cache", [this](const httplib::Request&, httplib::Response& res) {
      ++flushes_;
      res.set_content("Cache flushed.\n", "text/plain");
    });
    server_.Post("/generate", [this](const httplib::Request& req, httplib::Response& res) {
      handle(Api::Native, req, res);
    });
    server_.Post("/v1/completions", [this](const httplib::Request& req, httplib::Response& res) {
      handle(Api::Completions, req, res);
    });
    server_.Post("/v1/chat/completions",
                 [this](const httplib::Request& req, httplib::Response& res) {
                   handle(Api::Chat, req, res);
                 });
    port_ = server_.bind_to_any_port("127.0.0.1");
    thread_ = std::thread([this] { server_.listen_after_bind(); });
  }

  ~FakeServer() {
    server_.stop();
    thread_.join();
  }
  FakeServer(const FakeServer&) = delete;
  FakeServer& operator=(const FakeServer&) = delete;

  std::string url() const { return "http://127.0.0.1:" + std::to_string(port_); }
  // Tokens generated per request, in arrival order (0 for a failed request).
  std::vector<int64_t> tokens_per_request() const {
    std::lock_guard lock(mutex_);
    return tokens_;
  }
  int64_t flushes() const { return flushes_; }
  // What requests asked that bench-serving should not (not greedy, no ignore_eos...).
  std::vector<std::string> problems() const {
    std::lock_guard lock(mutex_);
    return problems_;
  }

 private:
  enum class Api { Native, Completions, Chat };

  struct Admitted {
    int64_t index = 0;
    int64_t max_tokens = 0;
    bool stream = true;
  };

  Admitted admit(Api api, const nlohmann::json& body) {
    const nlohmann::json& params =
        api == Api::Native ? body.value("sampling_params", nlohmann::json::object()) : body;
    Admitted a;
    a.max_tokens = params.value(api == Api::Native ? "max_new_tokens" : "max_tokens", int64_t{0});
    a.stream = body.value("stream", false);
    std::lock_guard lock(mutex_);
    a.index = static_cast<int64_t>(tokens_.size());
    tokens_.push_back(0);
    if (params.value("temperature", -1.0) != 0.0) problems_.push_back("not greedy: " + body.dump());
    if (!params.value("ignore_eos", false)) problems_.push_back("no ignore_eos: " + body.dump());
    if (a.max_tokens < 1) problems_.push_back("no max tokens: " + body.dump());
    const char* prompt_key = api == Api::Native ? "text" : api == Api::Chat ? "messages" : "prompt";
    if (!body.contains(prompt_key)) problems_.push_back("no prompt: " + body.dump());
    return a;
  }

  void handle(Api api, const httplib::Request& req, httplib::Response& res) {
    const nlohmann::json body = nlohmann::json::parse(req.body, nullptr, false);
    const Admitted a = admit(api, body);
    if (config_.fail_every > 0 && a.index % config_.fail_every == config_.fail_every - 1) {
      res.status = 500;
      res.set_content("boom", "text/plain");
      return;
    }
    {
      std::lock_guard lock(mutex_);
      tokens_[static_cast<size_t>(a.index)] = a.max_tokens;
    }
    const bool stalled = flushes_ > 0 && config_.stall_after_flush_s > 0.0;
    if (!a.stream) {
      sleep_s(config_.first_chunk_delay_s + (stalled ? config_.stall_after_flush_s : 0.0));
      res.set_content(whole_response(api, a.max_tokens).dump(), "application/json");
      return;
    }
    res.set_chunked_content_provider("text/event-stream",
                                     [this, api, a, stalled](size_t, httplib::DataSink& sink) {
                                       stream_chunks(api, a.max_tokens, stalled, sink);
                                       return true;
                                     });
  }

  static void sleep_s(double seconds) {
    std::this_thread::sleep_for(std::chrono::duration<double>(seconds));
  }

  static std::string words(int64_t count) {
    std::string text;
    for (int64_t i = 0; i < count; ++i) text += " the";
    return text;
  }

  nlohmann::json chunk(Api api, int64_t total, int64_t added) const {
    if (api == Api::Native) {
      return {{"text", words(total)}, {"meta_info", {{"completion_tokens", total}}}};
    }
    nlohmann::json choice = {{"index", 0}};
    if (api == Api::Completions) {
      choice["text"] = words(added);
    } else {
      choice["delta"] = {{"content", words(added)}};
    }
    const nlohmann::json usage = config_.usage_in_every_chunk
                                     ? nlohmann::json{{"completion_tokens", total}}
                                     : nlohmann::json(nullptr);
    return {{"choices", {choice}}, {"usage", usage}};
  }

  static nlohmann::json whole_response(Api api, int64_t tokens) {
    const nlohmann::json usage = {{"completion_tokens", tokens}};
    switch (api) {
      case Api::Native:
        return {{"text", words(tokens)}, {"meta_info", {{"completion_tokens", tokens}}}};
      case Api::Completions:
        return {{"choices", {{{"text", words(tokens)}}}}, {"usage", usage}};
      case Api::Chat:
        return {{"choices", {{{"message", {{"content", words(tokens)}}}}}}, {"usage", usage}};
    }
    return {};
  }

  static bool send(httplib::DataSink& sink, const std::string& payload) {
    const std::string event = "data: " + payload + "\n\n";
    return sink.write(event.data(), event.size());
  }

  void stream_chunks(Api api, int64_t tokens, bool stalled, httplib::DataSink& sink) const {
    if (api == Api::Chat)
      send(sink, R"({"choices":[{"delta":{"role":"assistant","content":""}}]})");
    sleep_s(config_.first_chunk_delay_s + (stalled ? config_.stall_after_flush_s : 0.0));
    int64_t sent = 0;
    while (sent < tokens) {
      const int64_t added = sent == 0 ? 1 : std::min(config_.tokens_per_chunk, tokens - sent);
      if (sent > 0) sleep_s(config_.chunk_gap_s);
      sent += added;
      if (!send(sink, chunk(api, sent, added).dump())) return;  // the client left
    }
    if (api != Api::Native) {
      send(sink, nlohmann::json({{"choices", nlohmann::json::array()},
                                 {"usage", {{"completion_tokens", tokens}}}})
                     .dump());
    }
    send(sink, "[DONE]");
    sink.done();
  }

  FakeServerConfig config_;
  httplib::Server server_;
  int port_ = 0;
  std::thread thread_;
  mutable std::mutex mutex_;
  std::vector<int64_t> tokens_;
  std::vector<std::string> problems_;
  std::atomic<int64_t> flushes_{0};
};

}  // namespace mlaserve::bench::testing
