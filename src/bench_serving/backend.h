// The HTTP APIs bench-serving can drive: what each request looks like and how each streamed
// chunk (or whole response) reports generated text and token counts.
//   mlaserve, sglang: POST /generate (SGLang's native API). Chunks carry the cumulative text
//     and meta_info.completion_tokens, the cumulative token count.
//   openai: POST /v1/completions; chunks carry choices[0].text, the new text.
//   openai-chat: POST /v1/chat/completions; chunks carry choices[0].delta.content.
// OpenAI chunks count one token per chunk with text unless the chunk reports usage (then the
// count is the rise in usage.completion_tokens); the final usage-only chunk that
// stream_options.include_usage asks for gives the request's token total, and carries the
// tokens itself when no chunk before it had text.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace mlaserve::bench_serving {

enum class Backend { Mlaserve, Sglang, OpenAi, OpenAiChat };

Backend parse_backend(std::string_view name);  // an Error for an unknown name
std::string_view backend_name(Backend backend);
std::string_view api_path(Backend backend);
// Whether the server has SGLang's native endpoints (/flush_cache, /get_model_info).
bool is_native(Backend backend);

struct RequestSpec {
  std::string prompt;
  int64_t max_tokens = 0;
  bool ignore_eos = true;
  bool stream = true;
  std::string model;  // the OpenAI "model" field
  // Merged into the body last (a JSON merge patch), e.g. {"response_format": {...}}.
  nlohmann::json extra_body;
  std::string rid;  // native: the request id ("rid"), for /abort_request; empty: the server's
};

// Greedy (temperature 0) generation of up to max_tokens tokens, plus extra_body.
nlohmann::json request_body(Backend backend, const RequestSpec& spec);

// What one chunk added.
struct ChunkDelta {
  std::string text;                          // new text
  int64_t new_tokens = 0;                    // tokens this chunk carried
  std::optional<int64_t> completion_tokens;  // the server's running total, when reported
  std::optional<int64_t> spec_verify_ct;     // native: speculative verify steps so far
  std::string error;                         // set when the chunk is an error object
  std::string finish_reason;  // "length", "stop", "abort"...: native finish_reason.type
  // native: the ids of every token generated so far (the chunk's cumulative output_ids)
  std::optional<std::vector<int32_t>> output_ids;
};

// Turns a backend's chunks into deltas; it remembers what earlier chunks said, so use one per
// request.
class ChunkParser {
 public:
  explicit ChunkParser(Backend backend) : backend_(backend) {}
  ChunkDelta parse(const nlohmann::json& chunk);

 private:
  ChunkDelta parse_native(const nlohmann::json& chunk);
  ChunkDelta parse_openai(const nlohmann::json& chunk);
  Backend backend_;
  size_t text_length_ = 0;  // native: the length of the cumulative text so far
  int64_t tokens_ = 0;      // tokens counted so far
};

// The text and token count (completion_tokens) of a whole (non-streamed) response.
ChunkDelta parse_response(Backend backend, const nlohmann::json& response);

}  // namespace mlaserve::bench_serving
