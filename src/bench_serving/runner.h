// bench-serving's run, as SGLang's bench_serving does it: build the dataset, send one warm-up
// request, flush the server's prefix cache, wait a second, then send every request at its
// arrival time with at most max_concurrency in flight, each as its plan says (request_plan.h),
// and compute the metrics.
#pragma once

#include <cstdio>
#include <vector>

#include "bench_serving/metrics.h"
#include "bench_serving/options.h"

namespace mlaserve::bench_serving {

struct BenchmarkRun {
  BenchOptions options;  // as run: with the tokenizer directory and model name it used
  std::vector<BenchRequest> requests;  // in dataset order, as are the plans and results
  std::vector<RequestPlan> plans;
  std::vector<RequestResult> results;
  BenchmarkMetrics metrics;
};

// Notes on progress (tokenizer, token totals, warm-up) go to `log`. An Error for bad options,
// an unusable tokenizer, or a failed warm-up request; failures of measured requests are
// counted in the metrics instead.
BenchmarkRun run_benchmark(BenchOptions options, std::FILE* log);

}  // namespace mlaserve::bench_serving
