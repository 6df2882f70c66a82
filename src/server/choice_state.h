// One generated sequence (an OpenAI "choice", an SGLang batch item): the engine's token events
// folded into text, token ids, logprobs and a finish reason, plus what a stream has not yet
// sent to the client.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "sched/generation.h"
#include "server/text_stream.h"

namespace mlaserve::server {

enum class FinishKind { Stop, Length, Abort, Error };

// "stop", "length", "abort" or "error", as SGLang and the OpenAI routes report them.
const char* finish_kind_name(FinishKind kind);

struct Finish {
  FinishKind kind;
  nlohmann::json matched;     // Stop: the stop string or stop token id, null for EOS-less stops
  std::string message;        // Error/Abort: why
  bool client_error = false;  // Error: the engine rejected the request as asked (HTTP 400)
};

// A generated token with its logprobs (kept only when the request asked for logprobs).
struct GeneratedToken {
  int32_t id;
  float logprob;
  std::vector<sampling::TokenLogprob> top;
  size_t text_offset;  // code points of generated text before this token
};

class ChoiceState {
 public:
  ChoiceState(size_t prompt_index, int64_t prompt_tokens, int64_t max_new_tokens, TextStream text,
              bool keep_logprobs);

  // Applies one engine event (ignored once finished). Returns true when this event made the
  // text hit a stop string: the engine request is still running and must be aborted.
  bool apply(const sched::TokenEvent& event);
  // Ends the choice from the server side (abort request, stop string already handled).
  void finish_aborted(const std::string& message);

  bool started() const { return started_; }  // has seen an engine event
  bool finished() const { return finish_.has_value(); }
  const std::optional<Finish>& finish() const { return finish_; }

  size_t prompt_index() const { return prompt_index_; }
  int64_t prompt_tokens() const { return prompt_tokens_; }
  int64_t cached_tokens() const { return cached_tokens_; }
  // Seconds the engine held the request before its prefill began.
  double queue_seconds() const { return queue_seconds_; }
  // Speculative verify steps so far (completion_tokens / this = the accept length).
  int64_t spec_verify_ct() const { return spec_verify_ct_; }
  int64_t max_new_tokens() const { return max_new_tokens_; }
  int64_t completion_tokens() const { return static_cast<int64_t>(output_ids_.size()); }
  const std::string& text() const { return text_; }
  const std::vector<int32_t>& output_ids() const { return output_ids_; }
  const std::vector<GeneratedToken>& tokens() const { return tokens_; }

  // What a stream has not sent yet; taking it marks it sent.
  struct Update {
    std::string_view text;
    std::span<const GeneratedToken> tokens;
    const Finish* finish;  // set once, on the update that reports the end
    bool empty() const { return text.empty() && tokens.empty() && !finish; }
  };
  Update take_update();

 private:
  void apply_token(const sched::TokenEvent& event, bool is_stop_token);
  void end(Finish finish);

  size_t prompt_index_;
  int64_t prompt_tokens_;
  int64_t max_new_tokens_;
  TextStream text_stream_;
  bool keep_logprobs_;

  bool started_ = false;
  int64_t cached_tokens_ = 0, spec_verify_ct_ = 0;
  double queue_seconds_ = 0;
  std::string text_;
  std::vector<int32_t> output_ids_;
  std::vector<GeneratedToken> tokens_;
  std::optional<Finish> finish_;

  size_t sent_text_ = 0;
  size_t sent_tokens_ = 0;
  bool sent_finish_ = false;
};

}  // namespace mlaserve::server
