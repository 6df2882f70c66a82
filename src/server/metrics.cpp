#include "server/metrics.h"

#include <fmt/format.h>

#include <algorithm>

namespace mlaserve::server {

namespace {

// Bucket bounds in seconds, spanning CPU decode steps (milliseconds) to long prefills.
std::vector<double> latency_buckets() {
  return {0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1,  0.25,
          0.5,   1.0,    2.5,   5.0,  10.0,  25.0, 50.0, 100.0};
}

std::vector<double> request_latency_buckets() {
  return {0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 25.0, 50.0, 100.0, 250.0, 500.0};
}

void header(std::string& out, std::string_view name, std::string_view type, std::string_view help) {
  out += fmt::format("# HELP {} {}\n# TYPE {} {}\n", name, help, name, type);
}

// Prometheus label values escape backslash, double quote and newline.
std::string escape_label(std::string_view value) {
  std::string escaped;
  for (const char c : value) {
    if (c == '\\') {
      escaped += "\\\\";
    } else if (c == '"') {
      escaped += "\\\"";
    } else if (c == '\n') {
      escaped += "\\n";
    } else {
      escaped += c;
    }
  }
  return escaped;
}

std::string label_value(const nlohmann::json& value) {
  return escape_label(value.is_string() ? value.get<std::string>() : value.dump());
}

std::string format_number(double value) {
  return fmt::format("{}", value);
}

// A series from a number field of `status`, if the engine reports it.
void series_from(std::string& out, const nlohmann::json& status, std::string_view key,
                 std::string_view name, std::string_view type, std::string_view help) {
  const auto it = status.find(key);
  if (it == status.end() || !it->is_number()) return;
  header(out, name, type, help);
  out += fmt::format("{} {}\n", name, format_number(it->get<double>()));
}

// What sched::ServingEngine::status() reports, engine-wide.
void render_engine_totals(std::string& out, const nlohmann::json& status) {
  struct Series {
    const char* key;
    const char* name;
    const char* type;
    const char* help;
  };
  static constexpr Series kSeries[] = {
      {"running_requests", "mlaserve_num_requests_running", "gauge",
       "Requests the engine is generating for."},
      {"waiting_requests", "mlaserve_num_requests_waiting", "gauge",
       "Requests queued in the engine."},
      {"kv_used_tokens", "mlaserve_kv_cache_used_tokens", "gauge",
       "KV cache slots in use, in tokens."},
      {"max_total_num_tokens", "mlaserve_kv_cache_capacity_tokens", "gauge",
       "KV cache capacity, in tokens."},
      {"kv_usage", "mlaserve_kv_cache_usage_ratio", "gauge", "Fraction of the KV cache in use."},
      {"steps", "mlaserve_engine_steps_total", "counter", "Engine forward steps."},
      {"retractions_total", "mlaserve_retractions_total", "counter",
       "Running requests retracted (back to the queue) because the KV cache ran out."},
      {"spec_verify_steps_total", "mlaserve_spec_verify_steps_total", "counter",
       "Speculative steps that verified drafts (accept length = 1 + accepted / verify steps)."},
      {"spec_accepted_drafts_total", "mlaserve_spec_accepted_drafts_total", "counter",
       "Draft tokens the model agreed with."},
  };
  for (const Series& series : kSeries) {
    series_from(out, status, series.key, series.name, series.type, series.help);
  }
}

// Per data-parallel group gauges from status["load"] entries that carry "dp_rank".
void render_group_load(std::string& out, const nlohmann::json& status) {
  const auto load = status.find("load");
  if (load == status.end() || !load->is_array()) return;
  static constexpr std::pair<const char*, const char*> kFields[] = {
      {"running_requests", "mlaserve_dp_running_requests"},
      {"waiting_requests", "mlaserve_dp_waiting_requests"},
      {"outstanding_tokens", "mlaserve_dp_outstanding_tokens"},
      {"kv_used_tokens", "mlaserve_dp_kv_cache_used_tokens"},
      {"kv_capacity_tokens", "mlaserve_dp_kv_cache_capacity_tokens"},
  };
  for (const auto& [key, name] : kFields) {
    std::string series;
    for (const nlohmann::json& group : *load) {
      if (!group.is_object() || !group.contains("dp_rank") || !group.contains(key)) continue;
      if (!group[key].is_number()) continue;
      series += fmt::format("{}{{dp_rank=\"{}\"}} {}\n", name, label_value(group["dp_rank"]),
                            format_number(group[key].get<double>()));
    }
    if (series.empty()) continue;
    header(out, name, "gauge", fmt::format("{} per data-parallel attention group.", key));
    out += series;
  }
}

}  // namespace

Histogram::Histogram(std::vector<double> upper_bounds)
    : upper_bounds_(std::move(upper_bounds)), counts_(upper_bounds_.size() + 1, 0) {}

void Histogram::observe(double value) {
  const auto bucket = std::lower_bound(upper_bounds_.begin(), upper_bounds_.end(), value);
  ++counts_[static_cast<size_t>(bucket - upper_bounds_.begin())];
  sum_ += value;
  ++count_;
}

void Histogram::render(std::string& out, std::string_view name) const {
  uint64_t cumulative = 0;
  for (size_t i = 0; i < upper_bounds_.size(); ++i) {
    cumulative += counts_[i];
    out += fmt::format("{}_bucket{{le=\"{}\"}} {}\n", name, format_number(upper_bounds_[i]),
                       cumulative);
  }
  out += fmt::format("{}_bucket{{le=\"+Inf\"}} {}\n", name, count_);
  out += fmt::format("{}_sum {}\n{}_count {}\n", name, format_number(sum_), name, count_);
}

Metrics::Metrics()
    : time_to_first_token_(latency_buckets()),
      inter_token_latency_(latency_buckets()),
      request_latency_(request_latency_buckets()) {}

void Metrics::count_request(const std::string& endpoint, int status) {
  std::lock_guard lock(mutex_);
  ++requests_[{endpoint, status}];
}

void Metrics::count_finished(const std::string& reason) {
  std::lock_guard lock(mutex_);
  ++finished_[reason];
}

void Metrics::add_prompt_tokens(int64_t tokens) {
  std::lock_guard lock(mutex_);
  prompt_tokens_ += tokens;
}

void Metrics::add_generation_tokens(int64_t tokens) {
  std::lock_guard lock(mutex_);
  generation_tokens_ += tokens;
}

void Metrics::observe_time_to_first_token(double seconds) {
  std::lock_guard lock(mutex_);
  time_to_first_token_.observe(seconds);
}

void Metrics::observe_inter_token_latency(double seconds) {
  std::lock_guard lock(mutex_);
  inter_token_latency_.observe(seconds);
}

void Metrics::observe_request_latency(double seconds) {
  std::lock_guard lock(mutex_);
  request_latency_.observe(seconds);
}

std::string Metrics::render(const nlohmann::json& engine_status) const {
  std::string out;
  render_counters(out);
  render_engine_totals(out, engine_status);
  render_group_load(out, engine_status);
  return out;
}

void Metrics::render_counters(std::string& out) const {
  std::lock_guard lock(mutex_);
  header(out, "mlaserve_http_requests_total", "counter", "HTTP requests by endpoint and status.");
  for (const auto& [key, count] : requests_) {
    out += fmt::format("mlaserve_http_requests_total{{endpoint=\"{}\",status=\"{}\"}} {}\n",
                       escape_label(key.first), key.second, count);
  }
  header(out, "mlaserve_request_finished_total", "counter",
         "Generated sequences by finish reason.");
  for (const auto& [reason, count] : finished_) {
    out += fmt::format("mlaserve_request_finished_total{{reason=\"{}\"}} {}\n",
                       escape_label(reason), count);
  }
  header(out, "mlaserve_prompt_tokens_total", "counter", "Prompt tokens submitted.");
  out += fmt::format("mlaserve_prompt_tokens_total {}\n", prompt_tokens_);
  header(out, "mlaserve_generation_tokens_total", "counter", "Tokens generated.");
  out += fmt::format("mlaserve_generation_tokens_total {}\n", generation_tokens_);
  header(out, "mlaserve_time_to_first_token_seconds", "histogram",
         "Time from request arrival to its first generated token.");
  time_to_first_token_.render(out, "mlaserve_time_to_first_token_seconds");
  header(out, "mlaserve_inter_token_latency_seconds", "histogram",
         "Time between consecutive generated tokens of a sequence.");
  inter_token_latency_.render(out, "mlaserve_inter_token_latency_seconds");
  header(out, "mlaserve_e2e_request_latency_seconds", "histogram",
         "Time from request arrival to its last generated token.");
  request_latency_.render(out, "mlaserve_e2e_request_latency_seconds");
}

}  // namespace mlaserve::server
