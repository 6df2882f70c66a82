// A fake inference server for bench-serving's tests: SGLang's native /generate and the OpenAI
// completions and chat APIs on 127.0.0.1 (a free port), streaming deterministic chunks with
// controlled delays: the first chunk carries one token after `first_chunk_delay_s`, each later
// one `tokens_per_chunk` tokens `chunk_gap_s` after the previous. Every token is the text
// " the". With llama_server_chunks the OpenAI streams are shaped as llama.cpp's llama-server
// sends them. The native API also reports output_ids and finish_reason, and a request sent with
// a "rid" can be aborted by POST /abort_request while it generates (a whole response takes as
// long as its stream would).
#pragma once

#include <httplib.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

namespace mlaserve::testing {

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
  // OpenAI APIs: chunks shaped as llama.cpp's llama-server (commit 34af94cd) streams them. Every
  // chunk has id, created, model, system_fingerprint and object, and no "usage" key; chat opens
  // with a {"role":"assistant","content":null} delta and closes with an empty delta carrying
  // finish_reason; completions close with a chunk of empty text, finish_reason, usage and
  // timings; chat sends its usage chunk (choices []) only when stream_options.include_usage
  // asks. GET /v1/models answers as llama-server does (the id is the GGUF path).
  bool llama_server_chunks = false;
  // With llama_server_chunks: request k (counted as for fail_every) streams no text at all, only
  // its closing chunks, when k % withhold_text_every == withhold_text_every - 1 (llama-server
  // withholds output that is not valid UTF-8 but still reports its tokens); and it answers 200,
  // streams one token, then an error chunk and no [DONE] when k % error_chunk_every ==
  // error_chunk_every - 1 (llama-server's answer when it cannot parse its own output).
  int64_t withhold_text_every = 0;
  int64_t error_chunk_every = 0;
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
    server_.Get("/v1/models", [this](const httplib::Request&, httplib::Response& res) {
      res.set_content(config_.llama_server_chunks ? kLlamaModels : kModels, "application/json");
    });
    server_.Post("/flush_cache", [this](const httplib::Request&, httplib::Response& res) {
      ++flushes_;
      res.set_content("Cache flushed.\n", "text/plain");
    });
    server_.Post("/abort_request",
                 [this](const httplib::Request& req, httplib::Response& res) { abort(req, res); });
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
    // A stop() before the listening loop starts is lost, and the destructor would wait forever
    // (a test that throws before its first request).
    while (!server_.is_running()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }

  ~FakeServer() {
    {
      std::lock_guard lock(mutex_);
      stopping_ = true;
    }
    stopping_changed_.notify_all();
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
  // Tokens generated for the measured requests (request 0 is bench-serving's warm-up).
  int64_t measured_tokens() const {
    std::lock_guard lock(mutex_);
    int64_t total = 0;
    for (size_t k = 1; k < tokens_.size(); ++k) total += tokens_[k];
    return total;
  }
  int64_t flushes() const { return flushes_; }
  // Requests that POST /abort_request ended.
  int64_t aborts() const { return aborts_; }
  // Streams whose client left before the end (a write failed).
  int64_t streams_left_early() const { return streams_left_early_; }
  // What requests asked that bench-serving should not (not greedy, no ignore_eos...).
  std::vector<std::string> problems() const {
    std::lock_guard lock(mutex_);
    return problems_;
  }

 private:
  enum class Api { Native, Completions, Chat };

  static constexpr const char* kModels =
      R"({"object":"list","data":[{"id":"fake-model","object":"model"}]})";
  static constexpr const char* kLlamaModels =
      R"({"models":[{"name":"/models/fake.gguf","model":"/models/fake.gguf","type":"model"}],)"
      R"("object":"list","data":[{"id":"/models/fake.gguf","aliases":["/models/fake.gguf"],)"
      R"("object":"model","owned_by":"llamacpp"}]})";

  static constexpr int kTheTokenId = 279;  // any id: output_ids repeat it for each " the"

  struct Admitted {
    int64_t index = 0;
    std::string rid;  // native: the request's "rid", when it came with one
    int64_t max_tokens = 0;
    bool stream = true;
    bool include_usage = false;  // stream_options.include_usage
  };

  static bool every(int64_t index, int64_t period) {
    return period > 0 && index % period == period - 1;
  }

  Admitted admit(Api api, const nlohmann::json& body) {
    const nlohmann::json& params =
        api == Api::Native ? body.value("sampling_params", nlohmann::json::object()) : body;
    Admitted a;
    a.max_tokens = params.value(api == Api::Native ? "max_new_tokens" : "max_tokens", int64_t{0});
    a.stream = body.value("stream", false);
    if (api == Api::Native) a.rid = body.value("rid", std::string());
    const nlohmann::json options = body.value("stream_options", nlohmann::json::object());
    a.include_usage = options.is_object() && options.value("include_usage", false);
    std::lock_guard lock(mutex_);
    a.index = static_cast<int64_t>(tokens_.size());
    tokens_.push_back(0);
    if (!a.rid.empty()) running_[a.rid] = false;
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
    if (every(a.index, config_.fail_every)) {
      res.status = 500;
      res.set_content("boom", "text/plain");
      return;
    }
    const bool llama = config_.llama_server_chunks && api != Api::Native;
    const bool error_chunk = llama && every(a.index, config_.error_chunk_every);
    if (!error_chunk) {
      std::lock_guard lock(mutex_);
      tokens_[static_cast<size_t>(a.index)] = a.max_tokens;
    }
    const bool stalled = flushes_ > 0 && config_.stall_after_flush_s > 0.0;
    if (!a.stream) {
      wait_before_first_chunk(stalled);
      int64_t generated = 1;
      while (generated < a.max_tokens) {
        sleep_s(config_.chunk_gap_s);
        if (aborted(a.rid)) break;
        generated = std::min(generated + config_.tokens_per_chunk, a.max_tokens);
      }
      const bool was_aborted = end(a.rid);
      res.set_content(whole_response(api, generated, was_aborted).dump(), "application/json");
      return;
    }
    if (llama) {
      const bool withhold_text = every(a.index, config_.withhold_text_every);
      res.set_chunked_content_provider(
          "text/event-stream",
          [this, api, a, withhold_text, error_chunk](size_t, httplib::DataSink& sink) {
            stream_llama_chunks(api, a, withhold_text, error_chunk, sink);
            return true;
          });
      return;
    }
    res.set_chunked_content_provider("text/event-stream",
                                     [this, api, a, stalled](size_t, httplib::DataSink& sink) {
                                       stream_chunks(api, a, stalled, sink);
                                       return true;
                                     });
  }

  // {"rid": ...}: 200 when that request is generating (it ends at its next token), else 404.
  void abort(const httplib::Request& req, httplib::Response& res) {
    const nlohmann::json body = nlohmann::json::parse(req.body, nullptr, false);
    const std::string rid = body.is_object() ? body.value("rid", std::string()) : std::string();
    std::lock_guard lock(mutex_);
    const auto it = running_.find(rid);
    if (it == running_.end() || it->second) {
      res.status = 404;
      res.set_content(R"({"error": "no such request"})", "application/json");
      return;
    }
    it->second = true;
    ++aborts_;
    res.set_content(R"({"aborted": 1})", "application/json");
  }

  bool aborted(const std::string& rid) const {
    std::lock_guard lock(mutex_);
    const auto it = running_.find(rid);
    return it != running_.end() && it->second;
  }

  // The request is over: forgets its rid; whether it was aborted.
  bool end(const std::string& rid) {
    std::lock_guard lock(mutex_);
    const auto it = running_.find(rid);
    if (it == running_.end()) return false;
    const bool was_aborted = it->second;
    running_.erase(it);
    return was_aborted;
  }

  static void sleep_s(double seconds) {
    std::this_thread::sleep_for(std::chrono::duration<double>(seconds));
  }

  // A stall ends early when the server is destroyed, so that a test can stall for far longer
  // than it waits without its end waiting for the stall.
  void wait_before_first_chunk(bool stalled) const {
    sleep_s(config_.first_chunk_delay_s);
    if (!stalled) return;
    std::unique_lock lock(mutex_);
    stopping_changed_.wait_for(lock, std::chrono::duration<double>(config_.stall_after_flush_s),
                               [this] { return stopping_; });
  }

  static std::string words(int64_t count) {
    std::string text;
    for (int64_t i = 0; i < count; ++i) text += " the";
    return text;
  }

  // {"type": "length"} or {"type": "abort"} once it ended, else null.
  static nlohmann::json native_item(int64_t tokens, const char* finish) {
    const nlohmann::json reason =
        finish ? nlohmann::json{{"type", finish}} : nlohmann::json(nullptr);
    return {{"text", words(tokens)},
            {"output_ids", std::vector<int>(static_cast<size_t>(tokens), kTheTokenId)},
            {"meta_info", {{"completion_tokens", tokens}, {"finish_reason", reason}}}};
  }

  nlohmann::json chunk(Api api, int64_t total, int64_t added) const {
    if (api == Api::Native) return native_item(total, nullptr);
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

  static nlohmann::json whole_response(Api api, int64_t tokens, bool was_aborted) {
    const nlohmann::json usage = {{"completion_tokens", tokens}};
    switch (api) {
      case Api::Native:
        return native_item(tokens, was_aborted ? "abort" : "length");
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

  void stream_chunks(Api api, const Admitted& a, bool stalled, httplib::DataSink& sink) {
    if (api == Api::Chat)
      send(sink, R"({"choices":[{"delta":{"role":"assistant","content":""}}]})");
    wait_before_first_chunk(stalled);
    const int64_t tokens = a.max_tokens;
    int64_t sent = 0;
    while (sent < tokens) {
      const int64_t added = sent == 0 ? 1 : std::min(config_.tokens_per_chunk, tokens - sent);
      if (sent > 0) sleep_s(config_.chunk_gap_s);
      if (aborted(a.rid)) break;
      sent += added;
      if (!send(sink, chunk(api, sent, added).dump())) return left_early(a.rid);
    }
    const nlohmann::json last = api == Api::Native
                                    ? native_item(sent, end(a.rid) ? "abort" : "length")
                                    : nlohmann::json({{"choices", nlohmann::json::array()},
                                                      {"usage", {{"completion_tokens", tokens}}}});
    if (!send(sink, last.dump()) || !send(sink, "[DONE]")) return left_early(a.rid);
    sink.done();
  }

  void left_early(const std::string& rid) {
    end(rid);
    ++streams_left_early_;
  }

  // One llama-server chunk: its fixed fields around `choices` (and `extra` fields).
  static nlohmann::json llama_chunk(Api api, nlohmann::json choices,
                                    nlohmann::json extra = nlohmann::json::object()) {
    nlohmann::json chunk = {
        {"choices", std::move(choices)},
        {"created", 1796272329},
        {"model", "/models/fake.gguf"},
        {"system_fingerprint", "b10470-34af94cd9"},
        {"object", api == Api::Chat ? "chat.completion.chunk" : "text_completion"},
        {"id", "chatcmpl-fake"}};
    chunk.update(extra);
    return chunk;
  }

  static nlohmann::json llama_choice(Api api, const nlohmann::json& text,
                                     const nlohmann::json& finish_reason) {
    if (api == Api::Chat) {
      const nlohmann::json delta =
          text.is_null() ? nlohmann::json::object() : nlohmann::json{{"content", text}};
      return {{"finish_reason", finish_reason}, {"index", 0}, {"delta", delta}};
    }
    return {{"text", text.is_null() ? nlohmann::json("") : text},
            {"index", 0},
            {"logprobs", nullptr},
            {"finish_reason", finish_reason}};
  }

  void stream_llama_chunks(Api api, const Admitted& a, bool withhold_text, bool error_chunk,
                           httplib::DataSink& sink) const {
    sleep_s(config_.first_chunk_delay_s);
    int64_t sent = 0;
    while (sent < a.max_tokens) {
      const int64_t added = sent == 0 ? 1 : std::min(config_.tokens_per_chunk, a.max_tokens - sent);
      if (sent > 0) sleep_s(config_.chunk_gap_s);
      sent += added;
      if (withhold_text) continue;
      if (sent == added && api == Api::Chat) {  // the opening delta comes with the first token
        const nlohmann::json opening = {{"finish_reason", nullptr},
                                        {"index", 0},
                                        {"delta", {{"role", "assistant"}, {"content", nullptr}}}};
        if (!send(sink, llama_chunk(api, nlohmann::json::array({opening})).dump())) return;
      }
      if (!send(sink,
                llama_chunk(api, nlohmann::json::array({llama_choice(api, words(added), nullptr)}))
                    .dump()))
        return;
      if (error_chunk) {
        send(sink, R"({"error":{"code":500,"message":"The model produced output that does not )"
                   R"(match the expected Content-only format","type":"server_error"}})");
        sink.done();
        return;
      }
    }
    const nlohmann::json usage = {{"completion_tokens", a.max_tokens},
                                  {"prompt_tokens", 33},
                                  {"total_tokens", a.max_tokens + 33},
                                  {"prompt_tokens_details", {{"cached_tokens", 0}}}};
    const nlohmann::json timings = {{"prompt_n", 33}, {"predicted_n", a.max_tokens}};
    const nlohmann::json closing = llama_choice(api, nullptr, "length");
    if (api == Api::Completions) {
      send(sink, llama_chunk(api, nlohmann::json::array({closing}),
                             {{"usage", usage}, {"timings", timings}})
                     .dump());
    } else {
      send(sink, llama_chunk(api, nlohmann::json::array({closing})).dump());
      if (a.include_usage) {
        send(sink,
             llama_chunk(api, nlohmann::json::array(), {{"usage", usage}, {"timings", timings}})
                 .dump());
      }
    }
    send(sink, "[DONE]");
    sink.done();
  }

  FakeServerConfig config_;
  httplib::Server server_;
  int port_ = 0;
  std::thread thread_;
  mutable std::mutex mutex_;
  mutable std::condition_variable stopping_changed_;
  bool stopping_ = false;
  std::vector<int64_t> tokens_;
  std::vector<std::string> problems_;
  std::atomic<int64_t> flushes_{0};
  std::atomic<int64_t> aborts_{0};
  std::atomic<int64_t> streams_left_early_{0};
  std::map<std::string, bool> running_;  // rid -> aborted, while the request generates
};

}  // namespace mlaserve::testing
