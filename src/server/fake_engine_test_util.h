// A deterministic stand-in for the engine, for the server tests. A worker thread emits one
// token per step for every running request, like a continuous-batching engine would:
//  - the "model" continues a prompt with the test's script, by default
//    (last prompt token + k) % vocab for k = 1, 2, ...; a finite script that runs out stalls
//    the request (it keeps running until aborted);
//  - max_new_tokens ends with "length", stop_token_ids and EOS (unless ignore_eos) with "stop";
//  - the token at position k has logprob -(k + 1) / 4; its alternatives are itself and the
//    following ids, each 1 lower;
//  - abort(id) ends a running request with an Abort event and is recorded for the tests.
#pragma once

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <list>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

#include "sched/generation.h"

namespace mlaserve::server::testing {

class FakeEngine final : public sched::EngineHandle {
 public:
  struct Options {
    int32_t vocab_size = 0;
    int32_t eos_id = 1;
    int64_t context_length = 256;
    std::chrono::microseconds step_interval{0};  // pause after each step
    int64_t cached_tokens = 0;                   // reported on each request's first event
  };
  using Script = std::function<std::vector<int32_t>(const sched::GenerationRequest&)>;

  explicit FakeEngine(Options options) : options_(options), worker_([this] { run(); }) {}

  ~FakeEngine() override {
    {
      std::lock_guard lock(mutex_);
      shutdown_ = true;
    }
    wake_.notify_all();
    worker_.join();
  }

  static float logprob_at(size_t position) { return -static_cast<float>(position + 1) / 4.0f; }

  void set_script(Script script) {
    std::lock_guard lock(mutex_);
    script_ = std::move(script);
  }
  // Requests whose prompt contains `token` fail with an Error event after generating
  // `after_tokens` tokens.
  void fail_prompts_containing(int32_t token, int64_t after_tokens = 0) {
    std::lock_guard lock(mutex_);
    failing_token_ = token;
    fail_after_tokens_ = after_tokens;
  }
  void set_flush_result(bool result) {
    std::lock_guard lock(mutex_);
    flush_result_ = result;
  }

  uint64_t submit(sched::GenerationRequest request, sched::EventSink sink) override {
    std::lock_guard lock(mutex_);
    const uint64_t id = next_id_++;
    submitted_.push_back(request);
    Running running{id, std::move(request), std::move(sink), {}, 0, false};
    if (script_) running.planned = script_(running.request);
    running_.push_back(std::move(running));
    wake_.notify_all();
    return id;
  }

  void abort(uint64_t id) override {
    std::lock_guard lock(mutex_);
    aborted_.push_back(id);
    for (Running& running : running_) {
      if (running.id == id) running.aborted = true;
    }
    wake_.notify_all();
    aborted_changed_.notify_all();
  }

  bool flush_cache() override {
    std::lock_guard lock(mutex_);
    ++flush_calls_;
    return flush_result_;
  }

  nlohmann::json status() const override {
    std::lock_guard lock(mutex_);
    int64_t kv_used = 0;
    for (const Running& running : running_) {
      kv_used += static_cast<int64_t>(running.request.prompt.size()) + running.generated;
    }
    const auto count = static_cast<int64_t>(running_.size());
    // The keys sched::ServingEngine reports.
    return {{"running_requests", count},
            {"waiting_requests", 0},
            {"kv_used_tokens", kv_used},
            {"max_total_num_tokens", 4096},
            {"kv_usage", static_cast<double>(kv_used) / 4096.0},
            {"load",
             {{{"dp_rank", 0},
               {"running_requests", count},
               {"waiting_requests", 0},
               {"outstanding_tokens", 0},
               {"kv_used_tokens", kv_used},
               {"kv_capacity_tokens", 4096}}}}};
  }

  int64_t context_length() const override { return options_.context_length; }

  std::vector<sched::GenerationRequest> submitted() const {
    std::lock_guard lock(mutex_);
    return submitted_;
  }
  std::vector<uint64_t> aborted() const {
    std::lock_guard lock(mutex_);
    return aborted_;
  }
  size_t running_count() const {
    std::lock_guard lock(mutex_);
    return running_.size();
  }
  int flush_calls() const {
    std::lock_guard lock(mutex_);
    return flush_calls_;
  }
  // Waits until some request has been aborted; returns its id.
  std::optional<uint64_t> wait_for_abort(std::chrono::milliseconds timeout) {
    std::unique_lock lock(mutex_);
    if (!aborted_changed_.wait_for(lock, timeout, [&] { return !aborted_.empty(); })) {
      return std::nullopt;
    }
    return aborted_.front();
  }
  // Waits until no request is running (all finished or aborted).
  bool wait_until_idle(std::chrono::milliseconds timeout) const {
    return poll_until([this] { return running_count() == 0; }, timeout);
  }
  // Waits until `count` requests have been submitted.
  bool wait_for_submitted(size_t count, std::chrono::milliseconds timeout) const {
    return poll_until([this, count] { return submitted().size() >= count; }, timeout);
  }

 private:
  // Checks `done` every 5 ms until it holds (true) or `timeout` passes (false).
  static bool poll_until(const std::function<bool()>& done, std::chrono::milliseconds timeout) {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    while (!done()) {
      if (std::chrono::steady_clock::now() >= deadline) return false;
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    return true;
  }

  struct Running {
    uint64_t id;
    sched::GenerationRequest request;
    sched::EventSink sink;
    std::vector<int32_t> planned;  // the script's tokens, when a script is set
    int64_t generated;
    bool aborted;
  };

  bool failing(const sched::GenerationRequest& request) const {
    return failing_token_ && std::find(request.prompt.begin(), request.prompt.end(),
                                       *failing_token_) != request.prompt.end();
  }

  // The next token of a request, or nothing when its script has run out.
  std::optional<int32_t> next_token(const Running& running) const {
    const auto k = static_cast<size_t>(running.generated);
    if (script_) {
      if (k >= running.planned.size()) return std::nullopt;
      return running.planned[k];
    }
    return static_cast<int32_t>((running.request.prompt.back() + static_cast<int64_t>(k) + 1) %
                                options_.vocab_size);
  }

  sched::TokenEvent token_event(const Running& running, int32_t token) const {
    sched::TokenEvent event;
    event.token = token;
    const auto position = static_cast<size_t>(running.generated);
    if (running.request.logprobs) event.logprob = logprob_at(position);
    for (int i = 0; i < running.request.top_logprobs; ++i) {
      event.top.push_back({(token + i) % options_.vocab_size, logprob_at(position) - i});
    }
    if (running.generated == 0) {
      event.prompt_tokens = static_cast<int64_t>(running.request.prompt.size());
      event.cached_tokens = options_.cached_tokens;
    }
    const auto& stops = running.request.stop_token_ids;
    const bool is_stop = std::find(stops.begin(), stops.end(), token) != stops.end() ||
                         (token == options_.eos_id && !running.request.ignore_eos);
    if (is_stop) {
      event.finish = sched::FinishReason::Stop;
    } else if (running.generated + 1 >= running.request.max_new_tokens) {
      event.finish = sched::FinishReason::Length;
    }
    return event;
  }

  // One engine step: each running request emits its next event. Returns false if none did.
  bool step() {
    bool emitted = false;
    for (auto it = running_.begin(); it != running_.end();) {
      sched::TokenEvent event;
      if (it->aborted) {
        event.finish = sched::FinishReason::Abort;
      } else if (failing(it->request) && it->generated >= fail_after_tokens_) {
        event.finish = sched::FinishReason::Error;
        event.error = "fake engine failure";
      } else if (const std::optional<int32_t> token = next_token(*it)) {
        event = token_event(*it, *token);
        ++it->generated;
      } else {
        ++it;  // stalled until aborted
        continue;
      }
      it->sink(event);
      emitted = true;
      it = event.finish == sched::FinishReason::None ? std::next(it) : running_.erase(it);
    }
    return emitted;
  }

  void run() {
    std::unique_lock lock(mutex_);
    while (!shutdown_) {
      if (!step()) {
        wake_.wait_for(lock, std::chrono::milliseconds(5));
        continue;
      }
      if (options_.step_interval.count() > 0) {
        lock.unlock();
        std::this_thread::sleep_for(options_.step_interval);
        lock.lock();
      }
    }
  }

  const Options options_;
  mutable std::mutex mutex_;
  std::condition_variable wake_;
  std::condition_variable aborted_changed_;
  std::list<Running> running_;
  std::vector<sched::GenerationRequest> submitted_;
  std::vector<uint64_t> aborted_;
  Script script_;
  std::optional<int32_t> failing_token_;
  int64_t fail_after_tokens_ = 0;
  bool flush_result_ = true;
  int flush_calls_ = 0;
  uint64_t next_id_ = 1;
  bool shutdown_ = false;
  std::thread worker_;  // last: starts once the members above exist
};

}  // namespace mlaserve::server::testing
