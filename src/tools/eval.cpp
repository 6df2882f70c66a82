// mlaserve eval: prompt logits and greedy continuations for token-id prompts (golden tests).
#include <spdlog/spdlog.h>

#include <fstream>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "model/static_batch.h"
#include "tools/commands.h"
#include "tools/model_options.h"

namespace mlaserve::tools {

namespace {

using nlohmann::json;

struct EvalOptions {
  ModelOptions model;
  std::string input, output;
  int64_t max_new_tokens = 16;
  bool all_logits = false, step_logits = false;
};

std::vector<std::vector<int32_t>> read_prompts(const std::string& path) {
  std::ifstream in(path);
  if (!in) fail("cannot open --input {}", path);
  json j;
  try {
    j = json::parse(in);
  } catch (const json::parse_error& e) {
    fail("{}: invalid JSON: {}", path, e.what());
  }
  if (!j.is_object() || !j.contains("prompts") || !j["prompts"].is_array()) {
    fail("{}: expected {{\"prompts\": [{{\"ids\": [...]}}, ...]}}", path);
  }
  std::vector<std::vector<int32_t>> prompts;
  for (const auto& p : j["prompts"]) {
    if (!p.is_object() || !p.contains("ids") || !p["ids"].is_array()) fail("{}: each prompt needs an \"ids\" array", path);
    std::vector<int32_t> ids;
    for (const auto& id : p["ids"]) {
      if (!id.is_number_integer()) fail("{}: token ids must be integers, got {}", path, id.dump());
      ids.push_back(id.get<int32_t>());
    }
    prompts.push_back(std::move(ids));
  }
  return prompts;
}

json rows_json(const float* data, int64_t rows, int64_t width) {
  json out = json::array();
  for (int64_t r = 0; r < rows; ++r) out.push_back(std::vector<float>(data + r * width, data + (r + 1) * width));
  return out;
}

int32_t argmax(const float* row, int64_t n) { return static_cast<int32_t>(std::max_element(row, row + n) - row); }

void run(const EvalOptions& o) {
  const auto prompts = read_prompts(o.input);
  model::DeepseekModel model(o.model.model_dir, o.model.weight_type());
  const int64_t V = model.config().vocab_size;
  int64_t kv_tokens = 0;
  for (const auto& p : prompts) kv_tokens += static_cast<int64_t>(p.size()) + o.max_new_tokens;
  cache::LatentKvPool kv(model.config().num_hidden_layers, model.config().kv_cache_dim(), std::max<int64_t>(kv_tokens, 1));
  model::SingleRankComm comm;
  model::StaticBatch batch(model, kv, comm, prompts, o.max_new_tokens);

  const size_t n = prompts.size();
  json out_prompts = json::array();
  for (size_t i = 0; i < n; ++i) out_prompts.push_back({{"ids", prompts[i]}, {"greedy", json::array()}});
  std::vector<float> logits = batch.prefill(o.all_logits);
  std::vector<int32_t> next(n);
  int64_t row = 0;
  for (size_t i = 0; i < n; ++i) {
    const int64_t rows = o.all_logits ? static_cast<int64_t>(prompts[i].size()) : 1;
    const float* last = logits.data() + (row + rows - 1) * V;
    out_prompts[i]["last_logits"] = std::vector<float>(last, last + V);
    if (o.all_logits) out_prompts[i]["all_logits"] = rows_json(logits.data() + row * V, rows, V);
    next[i] = argmax(last, V);
    if (o.step_logits) out_prompts[i]["greedy_logits"] = rows_json(last, 1, V);
    row += rows;
  }
  for (int64_t step = 0; step < o.max_new_tokens; ++step) {
    for (size_t i = 0; i < n; ++i) out_prompts[i]["greedy"].push_back(next[i]);
    if (step + 1 == o.max_new_tokens) break;
    logits = batch.decode(next);
    for (size_t i = 0; i < n; ++i) {
      const float* r = logits.data() + static_cast<int64_t>(i) * V;
      next[i] = argmax(r, V);
      if (o.step_logits) out_prompts[i]["greedy_logits"].push_back(std::vector<float>(r, r + V));
    }
  }
  std::ofstream out(o.output);
  if (!out) fail("cannot write --output {}", o.output);
  out << json{{"prompts", out_prompts}}.dump() << "\n";
  spdlog::info("eval: {} prompts, {} new tokens each, wrote {}", n, o.max_new_tokens, o.output);
}

}  // namespace

void add_eval(CLI::App& app) {
  auto opts = std::make_shared<EvalOptions>();
  CLI::App* cmd = app.add_subcommand("eval", "Prompt logits and greedy continuations for token-id prompts");
  opts->model.add_to(*cmd);
  cmd->add_option("--input", opts->input, "JSON {\"prompts\":[{\"ids\":[...]}, ...]}")->required();
  cmd->add_option("--output", opts->output,
                  "JSON {\"prompts\":[{\"ids\", \"last_logits\", \"greedy\"}, ...]} to write")
      ->required();
  cmd->add_option("--max-new-tokens", opts->max_new_tokens, "Greedy tokens to generate per prompt")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  cmd->add_flag("--all-logits", opts->all_logits, "Also write \"all_logits\": the logits at every prompt position");
  cmd->add_flag("--step-logits", opts->step_logits,
                "Also write \"greedy_logits\": the logits each greedy token was chosen from");
  cmd->callback([opts] { run(*opts); });
}

}  // namespace mlaserve::tools
