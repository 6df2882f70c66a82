#include "bench_serving/backend.h"

#include <algorithm>

#include "core/error.h"

namespace mlaserve::bench_serving {

using nlohmann::json;

Backend parse_backend(std::string_view name) {
  if (name == "mlaserve") return Backend::Mlaserve;
  if (name == "sglang") return Backend::Sglang;
  if (name == "openai") return Backend::OpenAi;
  if (name == "openai-chat") return Backend::OpenAiChat;
  fail("unknown backend '{}' (expected mlaserve, sglang, openai or openai-chat)", name);
}

std::string_view backend_name(Backend backend) {
  switch (backend) {
    case Backend::Mlaserve:
      return "mlaserve";
    case Backend::Sglang:
      return "sglang";
    case Backend::OpenAi:
      return "openai";
    case Backend::OpenAiChat:
      return "openai-chat";
  }
  return "?";
}

std::string_view api_path(Backend backend) {
  switch (backend) {
    case Backend::OpenAi:
      return "/v1/completions";
    case Backend::OpenAiChat:
      return "/v1/chat/completions";
    default:
      return "/generate";
  }
}

bool is_native(Backend backend) {
  return backend == Backend::Mlaserve || backend == Backend::Sglang;
}

namespace {

json base_request_body(Backend backend, const RequestSpec& spec) {
  if (is_native(backend)) {
    json body = {{"text", spec.prompt},
                 {"sampling_params",
                  {{"temperature", 0.0},
                   {"max_new_tokens", spec.max_tokens},
                   {"ignore_eos", spec.ignore_eos}}},
                 {"stream", spec.stream}};
    if (!spec.rid.empty()) body["rid"] = spec.rid;
    return body;
  }
  json body = {{"model", spec.model},
               {"temperature", 0.0},
               {"max_tokens", spec.max_tokens},
               {"ignore_eos", spec.ignore_eos},
               {"stream", spec.stream}};
  if (spec.stream) body["stream_options"] = {{"include_usage", true}};
  if (backend == Backend::OpenAiChat) {
    body["messages"] = json::array({{{"role", "user"}, {"content", spec.prompt}}});
  } else {
    body["prompt"] = spec.prompt;
  }
  return body;
}

}  // namespace

json request_body(Backend backend, const RequestSpec& spec) {
  json body = base_request_body(backend, spec);
  if (!spec.extra_body.is_null()) body.merge_patch(spec.extra_body);
  return body;
}

namespace {

std::string string_at(const json& object, const char* key) {
  const auto it = object.find(key);
  return it != object.end() && it->is_string() ? it->get<std::string>() : std::string();
}

std::optional<int64_t> integer_at(const json& object, const char* key) {
  const auto it = object.find(key);
  if (it == object.end() || !it->is_number_integer()) return std::nullopt;
  return it->get<int64_t>();
}

// {"error": "..."} or {"error": {"message": "..."}}, as servers send mid-stream.
std::string error_of(const json& chunk) {
  const auto it = chunk.find("error");
  if (it == chunk.end() || it->is_null()) return {};
  if (it->is_string()) return it->get<std::string>();
  if (it->is_object() && it->contains("message")) return string_at(*it, "message");
  return it->dump();
}

// A list of token ids; nullopt when absent or not all integers.
std::optional<std::vector<int32_t>> token_ids_at(const json& object, const char* key) {
  const auto it = object.find(key);
  if (it == object.end() || !it->is_array()) return std::nullopt;
  std::vector<int32_t> ids;
  for (const json& id : *it) {
    if (!id.is_number_integer()) return std::nullopt;
    ids.push_back(id.get<int32_t>());
  }
  return ids;
}

const json* native_meta(const json& chunk) {
  const auto meta = chunk.find("meta_info");
  return meta != chunk.end() && meta->is_object() ? &*meta : nullptr;
}

// meta_info's counts, finish reason ({"type": ...}) and output_ids, as native chunks and whole
// responses carry them.
void add_native_meta(const json& chunk, ChunkDelta& delta) {
  delta.output_ids = token_ids_at(chunk, "output_ids");
  const json* meta = native_meta(chunk);
  if (!meta) return;
  delta.completion_tokens = integer_at(*meta, "completion_tokens");
  delta.spec_verify_ct = integer_at(*meta, "spec_verify_ct");
  if (const auto finish = meta->find("finish_reason"); finish != meta->end() && finish->is_object())
    delta.finish_reason = string_at(*finish, "type");
}

std::optional<int64_t> usage_completion_tokens(const json& chunk) {
  const auto usage = chunk.find("usage");
  if (usage == chunk.end() || !usage->is_object()) return std::nullopt;
  return integer_at(*usage, "completion_tokens");
}

const json* first_choice(const json& chunk) {
  const auto choices = chunk.find("choices");
  if (choices == chunk.end() || !choices->is_array() || choices->empty()) return nullptr;
  return (*choices)[0].is_object() ? &(*choices)[0] : nullptr;
}

// choices[0].text for completions; choices[0].delta.content (and reasoning_content, which
// reasoning models stream before the answer) for chat; message.content in a whole response.
std::string openai_text(const json& chunk) {
  const json* first = first_choice(chunk);
  if (!first) return {};
  const json& choice = *first;
  std::string text = string_at(choice, "text");
  for (const char* holder : {"delta", "message"}) {
    const auto it = choice.find(holder);
    if (it == choice.end() || !it->is_object()) continue;
    text += string_at(*it, "reasoning_content") + string_at(*it, "content");
  }
  return text;
}

std::string openai_finish_reason(const json& chunk) {
  const json* choice = first_choice(chunk);
  return choice ? string_at(*choice, "finish_reason") : std::string();
}

}  // namespace

ChunkDelta ChunkParser::parse(const json& chunk) {
  ChunkDelta delta;
  if (!chunk.is_object()) {
    delta.error = "unexpected chunk " + chunk.dump();
    return delta;
  }
  delta.error = error_of(chunk);
  if (!delta.error.empty()) return delta;
  return is_native(backend_) ? parse_native(chunk) : parse_openai(chunk);
}

ChunkDelta ChunkParser::parse_native(const json& chunk) {
  ChunkDelta delta;
  const std::string text = string_at(chunk, "text");
  if (text.size() > text_length_) delta.text = text.substr(text_length_);
  text_length_ = std::max(text_length_, text.size());
  add_native_meta(chunk, delta);
  if (delta.completion_tokens) {
    delta.new_tokens = std::max<int64_t>(*delta.completion_tokens - tokens_, 0);
  } else if (!delta.text.empty()) {
    delta.new_tokens = 1;  // a server that does not count: one token per chunk with text
  }
  tokens_ += delta.new_tokens;
  return delta;
}

ChunkDelta ChunkParser::parse_openai(const json& chunk) {
  ChunkDelta delta;
  delta.text = openai_text(chunk);
  delta.completion_tokens = usage_completion_tokens(chunk);
  delta.finish_reason = openai_finish_reason(chunk);
  // Only a chunk with text carries tokens: the usage-only chunk at the end repeats the total.
  // Unless no chunk had text: then the tokens the usage reports arrived with it (llama-server
  // streams no text for output that is not valid UTF-8, yet reports its tokens at the end).
  if (!delta.text.empty()) {
    delta.new_tokens =
        delta.completion_tokens ? std::max<int64_t>(*delta.completion_tokens - tokens_, 1) : 1;
  } else if (tokens_ == 0 && delta.completion_tokens) {
    delta.new_tokens = std::max<int64_t>(*delta.completion_tokens, 0);
  }
  tokens_ += delta.new_tokens;
  return delta;
}

ChunkDelta parse_response(Backend backend, const json& response) {
  ChunkDelta delta;
  if (!response.is_object()) {
    delta.error = "unexpected response " + response.dump();
    return delta;
  }
  delta.error = error_of(response);
  if (!delta.error.empty()) return delta;
  if (is_native(backend)) {
    delta.text = string_at(response, "text");
    add_native_meta(response, delta);
  } else {
    delta.text = openai_text(response);
    delta.completion_tokens = usage_completion_tokens(response);
    delta.finish_reason = openai_finish_reason(response);
  }
  return delta;
}

}  // namespace mlaserve::bench_serving
