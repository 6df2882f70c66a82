#include "server/generation_options.h"

#include <fmt/format.h>

#include <charconv>
#include <limits>

#include "core/error.h"
#include "server/api_error.h"
#include "server/json_fields.h"

namespace mlaserve::server {

namespace {

constexpr int kMaxChoices = 128;
constexpr int kMaxTopLogprobs = 20;

int read_bounded_int(const nlohmann::json& object, const char* key, int64_t min, int64_t max,
                     int fallback) {
  const std::optional<int64_t> value = read_int(object, key);
  if (!value) return fallback;
  if (*value < min || *value > max) {
    throw invalid_request(fmt::format("'{}' must be in [{}, {}], got {}", key, min, max, *value),
                          key);
  }
  return static_cast<int>(*value);
}

void read_float(const nlohmann::json& object, const char* key, float& out) {
  if (const std::optional<double> value = read_number(object, key)) {
    out = static_cast<float>(*value);
  }
}

std::optional<int64_t> read_max_tokens(const nlohmann::json& object, const char* key) {
  const std::optional<int64_t> value = read_int(object, key);
  if (value && *value < 1) {
    throw invalid_request(fmt::format("'{}' must be at least 1, got {}", key, *value), key);
  }
  return value;
}

// SamplingParams::validate names the offending field first in its message.
void validate_sampling(const sampling::SamplingParams& params) {
  try {
    params.validate();
  } catch (const Error& error) {
    const std::string message = error.what();
    throw invalid_request(message, message.substr(0, message.find(' ')));
  }
}

// OpenAI's logit_bias: {"token id": bias}, the ids decimal strings inside the vocabulary, the
// biases numbers in [-100, 100] (SamplingParams::validate checks the range).
void read_logit_bias(const nlohmann::json& object, int32_t vocab_size,
                     sampling::SamplingParams& sampling) {
  const nlohmann::json* bias = field(object, "logit_bias");
  if (!bias) return;
  if (!bias->is_object()) {
    throw invalid_request("'logit_bias' must be an object mapping token ids to numbers",
                          "logit_bias");
  }
  for (const auto& [key, value] : bias->items()) {
    const std::string path = "logit_bias." + key;
    int64_t id = -1;
    const auto [end, error] = std::from_chars(key.data(), key.data() + key.size(), id);
    if (error != std::errc() || end != key.data() + key.size() || id < 0 || id >= vocab_size) {
      throw invalid_request(
          fmt::format("'logit_bias' key '{}' is not a token id in [0, {})", key, vocab_size), path);
    }
    if (!value.is_number()) {
      throw invalid_request(fmt::format("'{}' must be a number in [-100, 100]", path), path);
    }
    sampling.logit_bias.emplace_back(static_cast<int32_t>(id), value.get<float>());
  }
}

// The sampling fields OpenAI and SGLang spell alike, read from `object` and checked.
void read_sampling(const nlohmann::json& object, int32_t vocab_size,
                   sampling::SamplingParams& sampling) {
  read_float(object, "temperature", sampling.temperature);
  read_float(object, "top_p", sampling.top_p);
  read_float(object, "min_p", sampling.min_p);
  read_float(object, "presence_penalty", sampling.presence_penalty);
  read_float(object, "frequency_penalty", sampling.frequency_penalty);
  read_float(object, "repetition_penalty", sampling.repetition_penalty);
  sampling.top_k = read_bounded_int(object, "top_k", -1, std::numeric_limits<int32_t>::max(), -1);
  if (const std::optional<int64_t> seed = read_int(object, "seed")) {
    sampling.seed = static_cast<uint64_t>(*seed);
  }
  read_logit_bias(object, vocab_size, sampling);
  validate_sampling(sampling);
}

// The fields OpenAI and SGLang spell alike, read from `object`.
void read_shared_fields(const nlohmann::json& object, int32_t vocab_size,
                        GenerationOptions& options) {
  read_sampling(object, vocab_size, options.sampling);
  options.stop = read_string_or_list(object, "stop");
  for (const std::string& stop : options.stop) {
    if (stop.empty()) throw invalid_request("'stop' strings must not be empty", "stop");
  }
  if (const nlohmann::json* ids = field(object, "stop_token_ids")) {
    options.stop_token_ids = read_token_ids(*ids, "stop_token_ids", vocab_size);
  }
  options.ignore_eos = read_bool(object, "ignore_eos").value_or(false);
  options.skip_special_tokens = read_bool(object, "skip_special_tokens").value_or(true);
  options.n = read_bounded_int(object, "n", 1, kMaxChoices, 1);
}

// The request controls on every route's top level, as vLLM and SGLang take them: "priority" and
// "cache_salt" (requests share cached prompt prefixes only with requests of the same salt).
void read_request_controls(const nlohmann::json& body, GenerationOptions& options) {
  options.priority = read_bounded_int(body, "priority", std::numeric_limits<int32_t>::min(),
                                      std::numeric_limits<int32_t>::max(), 0);
  options.cache_salt = read_string(body, "cache_salt").value_or("");
}

void read_openai_logprobs(const nlohmann::json& body, Api api, GenerationOptions& options) {
  if (api == Api::Completions) {
    // Legacy completions: "logprobs": N asks for the chosen token and N alternatives.
    if (field(body, "logprobs")) {
      options.logprobs = true;
      options.top_logprobs = read_bounded_int(body, "logprobs", 0, kMaxTopLogprobs, 0);
    }
    return;
  }
  options.logprobs = read_bool(body, "logprobs").value_or(false);
  options.top_logprobs = read_bounded_int(body, "top_logprobs", 0, kMaxTopLogprobs, 0);
  if (field(body, "top_logprobs") && !options.logprobs) {
    throw invalid_request("'top_logprobs' requires 'logprobs' to be true", "top_logprobs");
  }
}

void read_stream_options(const nlohmann::json& body, GenerationOptions& options) {
  options.stream = read_bool(body, "stream").value_or(false);
  const nlohmann::json* stream_options = field(body, "stream_options");
  if (!stream_options) return;
  if (!stream_options->is_object()) {
    throw invalid_request("'stream_options' must be an object", "stream_options");
  }
  if (!options.stream) {
    throw invalid_request("'stream_options' is only allowed when 'stream' is true",
                          "stream_options");
  }
  options.include_usage = read_bool(*stream_options, "include_usage").value_or(false);
}

}  // namespace

GenerationOptions parse_openai_options(const nlohmann::json& body, Api api, int32_t vocab_size) {
  GenerationOptions options;
  read_shared_fields(body, vocab_size, options);
  options.max_new_tokens = read_max_tokens(body, "max_tokens");
  if (api == Api::Chat) {
    if (auto max_completion = read_max_tokens(body, "max_completion_tokens")) {
      options.max_new_tokens = max_completion;
    }
  }
  read_openai_logprobs(body, api, options);
  read_stream_options(body, options);
  read_request_controls(body, options);
  options.return_timings = read_bool(body, "return_timings").value_or(false);
  if (api == Api::Completions) {
    options.echo = read_bool(body, "echo").value_or(false);
    if (options.echo && options.logprobs) {
      throw invalid_request("'echo' with 'logprobs' is not supported (no prompt logprobs)", "echo");
    }
  }
  return options;
}

GenerationOptions parse_anthropic_options(const nlohmann::json& body, bool needs_max_tokens) {
  GenerationOptions options;
  read_float(body, "temperature", options.sampling.temperature);
  read_float(body, "top_p", options.sampling.top_p);
  options.sampling.top_k =
      read_bounded_int(body, "top_k", -1, std::numeric_limits<int32_t>::max(), -1);
  validate_sampling(options.sampling);
  options.max_new_tokens = read_max_tokens(body, "max_tokens");
  if (needs_max_tokens && !options.max_new_tokens) {
    throw invalid_request("'max_tokens' is required", "max_tokens");
  }
  if (const nlohmann::json* stops = field(body, "stop_sequences")) {
    if (!stops->is_array()) {
      throw invalid_request("'stop_sequences' must be a list of strings", "stop_sequences");
    }
    options.stop = read_string_or_list(body, "stop_sequences");
  }
  for (const std::string& stop : options.stop) {
    if (stop.empty())
      throw invalid_request("'stop_sequences' must not hold empty strings", "stop_sequences");
  }
  options.stream = read_bool(body, "stream").value_or(false);
  read_request_controls(body, options);
  return options;
}

GenerationOptions parse_responses_options(const nlohmann::json& body, int32_t vocab_size) {
  GenerationOptions options;
  read_sampling(body, vocab_size, options.sampling);
  options.max_new_tokens = read_max_tokens(body, "max_output_tokens");
  options.top_logprobs = read_bounded_int(body, "top_logprobs", 0, kMaxTopLogprobs, 0);
  options.logprobs = options.top_logprobs > 0;
  options.stream = read_bool(body, "stream").value_or(false);
  read_request_controls(body, options);
  return options;
}

GenerationOptions parse_native_options(const nlohmann::json& body, int32_t vocab_size) {
  GenerationOptions options;
  static const nlohmann::json kNoSamplingParams = nlohmann::json::object();
  const nlohmann::json* sampling_params = field(body, "sampling_params");
  if (sampling_params && !sampling_params->is_object()) {
    throw invalid_request("'sampling_params' must be an object", "sampling_params");
  }
  const nlohmann::json& params = sampling_params ? *sampling_params : kNoSamplingParams;
  read_shared_fields(params, vocab_size, options);
  options.max_new_tokens = read_max_tokens(params, "max_new_tokens");
  options.stream = read_bool(body, "stream").value_or(false);
  options.logprobs = read_bool(body, "return_logprob").value_or(false);
  options.top_logprobs = read_bounded_int(body, "top_logprobs_num", 0, kMaxTopLogprobs, 0);
  options.return_text_in_logprobs = read_bool(body, "return_text_in_logprobs").value_or(false);
  read_request_controls(body, options);
  if (!options.logprobs) options.top_logprobs = 0;
  return options;
}

sched::GenerationRequest engine_request(const GenerationOptions& options,
                                        std::vector<int32_t> prompt, int64_t max_new_tokens,
                                        size_t choice_index) {
  sched::GenerationRequest request;
  request.prompt = std::move(prompt);
  request.max_new_tokens = max_new_tokens;
  request.sampling = options.sampling;
  if (request.sampling.seed) *request.sampling.seed += choice_index;
  request.stop_token_ids = options.stop_token_ids;
  request.ignore_eos = options.ignore_eos;
  request.logprobs = options.logprobs;
  request.top_logprobs = options.top_logprobs;
  request.priority = options.priority;
  request.cache_salt = options.cache_salt;
  if (options.make_constraint) request.constraint = options.make_constraint();
  return request;
}

}  // namespace mlaserve::server
