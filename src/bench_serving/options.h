// Everything `mlaserve bench-serving` is told; the flags map onto these one by one.
#pragma once

#include <cstdint>
#include <limits>
#include <string>

#include "bench_serving/backend.h"
#include "bench_serving/dataset.h"
#include "bench_serving/request_plan.h"

namespace mlaserve::bench_serving {

struct BenchOptions {
  std::string base_url;
  Backend backend = Backend::Mlaserve;
  DatasetOptions dataset;
  double request_rate = std::numeric_limits<double>::infinity();  // requests per second
  int64_t max_concurrency = 0;                                    // 0: not set
  uint64_t seed = 1;
  std::string tokenizer_dir;  // empty: the served model's, from GET /get_model_info
  std::string model;          // the OpenAI "model" field; empty: the first of GET /v1/models
  std::string output_file;    // JSONL to append the result to; empty: none
  nlohmann::json extra_request_body;  // merged into every request (a JSON merge patch)
  std::string output_details;  // JSONL with one line per request (request_details.h); empty: none
  bool ignore_eos = true;
  MixOptions mix;  // streaming or not, and the faults to inject
  double request_timeout_s = 600.0;
  double pause_before_run_s = 1.0;  // after warm-up and cache flush, as SGLang sleeps 1 s
  bool progress = true;             // a progress bar on stderr, when stderr is a terminal
};

// More requests than this are never in flight at once, whatever --max-concurrency says: each
// one holds a thread and a connection.
inline constexpr int64_t kMaxInFlight = 1024;

}  // namespace mlaserve::bench_serving
