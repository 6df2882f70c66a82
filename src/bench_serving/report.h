// The printed result table and the JSONL record, laid out as SGLang's bench_serving does.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "bench_serving/metrics.h"
#include "bench_serving/options.h"

namespace mlaserve::bench_serving {

// The table, line by line as SGLang prints it: a blank line, the 50-wide "=" title, one
// "{label:<40} {value:<10}" line per figure (floats with 2 decimals), "-" section lines for
// End-to-End Latency, Time to First Token, Time per Output Token (excl. 1st token) and
// Inter-Token Latency, and a closing line of 50 "=". "Failed requests:" and the first error
// are added (after "Successful requests:" and after the table) only when requests failed; the
// disconnected and aborted requests (after "Failed requests:") only when there were any.
std::string format_table(const BenchOptions& options, const BenchmarkMetrics& metrics);

// SGLang's JSONL record (its field names: settings, then duration, totals, throughputs, and
// mean/median/std/p99 of E2E, TTFT and TPOT, mean/median/std/p95/p99/max of ITL, concurrency)
// plus num_prompts, seed, base_url, tokenizer, failed and first_error, the request mix (stream,
// disconnect and abort fractions) with the cut and aborted counts, and the date. An
// infinite request rate is written as the string "inf" (JSON has no infinity).
nlohmann::ordered_json result_record(const BenchOptions& options, const BenchmarkMetrics& metrics);

// Appends the record as one line; an Error if the file cannot be written.
void append_jsonl(const std::string& path, const nlohmann::ordered_json& record);

}  // namespace mlaserve::bench_serving
