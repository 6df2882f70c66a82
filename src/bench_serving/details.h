// --output-details: one JSON line per request, in dataset order, so that a checker can re-run
// the completed requests one at a time and compare: the prompt (text), the settings it was sent
// with, how it ended (ok, cut, aborted, failed) and what it generated (the native API's token
// ids, and the text).
#pragma once

#include <cstddef>
#include <nlohmann/json.hpp>
#include <string>

#include "bench_serving/runner.h"

namespace mlaserve::bench_serving {

// Fields: index, rid (when it had one), prompt, prompt_len, max_new_tokens, ignore_eos,
// temperature (always 0), stream, disconnect_after and abort_delay_s (when planned), outcome,
// error (when failed), output_len, output_ids (when the server reported them), text, ttft_s,
// latency_s.
nlohmann::ordered_json request_detail(const BenchmarkRun& run, size_t index);

// Writes every request's line to `path` (replacing the file); an Error if it cannot be written.
void write_details(const std::string& path, const BenchmarkRun& run);

}  // namespace mlaserve::bench_serving
