// Counters and histograms for GET /metrics, rendered in the Prometheus text exposition format
// together with gauges read from the engine's status(): "running_requests",
// "waiting_requests", "kv_used_tokens", "max_total_num_tokens", "kv_usage", "steps", and per
// data-parallel group "load": [{"dp_rank", "running_requests", "waiting_requests",
// "outstanding_tokens", "kv_used_tokens", "kv_capacity_tokens"}] (sched::ServingEngine's keys;
// absent keys are left out).
#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

namespace mlaserve::server {

class Histogram {
 public:
  explicit Histogram(std::vector<double> upper_bounds);
  void observe(double value);
  // Appends the _bucket, _sum and _count series of metric `name`.
  void render(std::string& out, std::string_view name) const;

 private:
  std::vector<double> upper_bounds_;
  std::vector<uint64_t> counts_;  // per bucket, not cumulative; the last is +Inf
  double sum_ = 0;
  uint64_t count_ = 0;
};

class Metrics {
 public:
  Metrics();

  void count_request(const std::string& endpoint, int status);
  void count_finished(const std::string& reason);
  void add_prompt_tokens(int64_t tokens);
  void add_generation_tokens(int64_t tokens);
  void observe_time_to_first_token(double seconds);
  void observe_inter_token_latency(double seconds);
  void observe_request_latency(double seconds);

  std::string render(const nlohmann::json& engine_status) const;

 private:
  void render_counters(std::string& out) const;

  mutable std::mutex mutex_;
  std::map<std::pair<std::string, int>, uint64_t> requests_;  // (endpoint, status)
  std::map<std::string, uint64_t> finished_;                  // by finish reason
  int64_t prompt_tokens_ = 0;
  int64_t generation_tokens_ = 0;
  Histogram time_to_first_token_;
  Histogram inter_token_latency_;
  Histogram request_latency_;
};

}  // namespace mlaserve::server
