#include "bench_serving/details.h"

#include <fstream>

#include "core/error.h"

namespace mlaserve::bench_serving {

using nlohmann::ordered_json;

namespace {

void add_request(ordered_json& line, const BenchRequest& request, const RequestPlan& plan,
                 bool ignore_eos) {
  if (!plan.rid.empty()) line["rid"] = plan.rid;
  line["prompt"] = request.prompt;
  line["prompt_len"] = request.prompt_len;
  line["max_new_tokens"] = request.output_len;
  line["ignore_eos"] = ignore_eos;
  line["temperature"] = 0.0;  // every request is greedy (backend.h)
  line["stream"] = plan.stream;
  if (plan.disconnect_after > 0) line["disconnect_after"] = plan.disconnect_after;
  if (plan.abort_delay_s) line["abort_delay_s"] = *plan.abort_delay_s;
}

void add_result(ordered_json& line, const RequestResult& result) {
  line["outcome"] = outcome_name(result.outcome);
  if (result.outcome == Outcome::Failed) line["error"] = result.error;
  line["output_len"] = result.output_len;
  if (!result.output_ids.empty()) line["output_ids"] = result.output_ids;
  line["text"] = result.generated_text;
  line["ttft_s"] = result.ttft;
  line["latency_s"] = result.latency;
}

}  // namespace

ordered_json request_detail(const BenchmarkRun& run, size_t index) {
  ordered_json line;
  line["index"] = index;
  add_request(line, run.requests.at(index), run.plans.at(index), run.options.ignore_eos);
  add_result(line, run.results.at(index));
  return line;
}

void write_details(const std::string& path, const BenchmarkRun& run) {
  std::ofstream file(path, std::ios::trunc);
  if (!file) fail("cannot open --output-details {} for writing", path);
  for (size_t i = 0; i < run.results.size(); ++i) {
    file << request_detail(run, i).dump(-1, ' ', false, ordered_json::error_handler_t::replace)
         << '\n';
  }
  if (!file) fail("cannot write --output-details {}", path);
}

}  // namespace mlaserve::bench_serving
