#include "server/choice_state.h"

#include <utility>

namespace mlaserve::server {

const char* finish_kind_name(FinishKind kind) {
  switch (kind) {
    case FinishKind::Stop:
      return "stop";
    case FinishKind::Length:
      return "length";
    case FinishKind::Abort:
      return "abort";
    case FinishKind::Error:
      return "error";
  }
  return "error";
}

ChoiceState::ChoiceState(size_t prompt_index, int64_t prompt_tokens, int64_t max_new_tokens,
                         TextStream text, bool keep_logprobs)
    : prompt_index_(prompt_index),
      prompt_tokens_(prompt_tokens),
      max_new_tokens_(max_new_tokens),
      text_stream_(std::move(text)),
      keep_logprobs_(keep_logprobs) {}

bool ChoiceState::apply(const sched::TokenEvent& event) {
  if (finished()) return false;
  if (!started_) {
    started_ = true;
    cached_tokens_ = event.cached_tokens;
    queue_seconds_ = event.queue_seconds;
  }
  spec_verify_ct_ = event.spec_verify_ct;
  // The engine reports "stop" on the token that stopped it: EOS or a stop_token_id. Like SGLang
  // and vLLM, that token counts as generated but is not part of the text.
  const bool is_stop_token = event.finish == sched::FinishReason::Stop && event.token >= 0;
  if (event.token >= 0) apply_token(event, is_stop_token);
  if (text_stream_.matched_stop()) {
    end({FinishKind::Stop, *text_stream_.matched_stop(), {}});
    return event.finish == sched::FinishReason::None;
  }
  switch (event.finish) {
    case sched::FinishReason::None:
      break;
    case sched::FinishReason::Stop:
      end({FinishKind::Stop, is_stop_token ? nlohmann::json(event.token) : nullptr, {}});
      break;
    case sched::FinishReason::Length:
      end({FinishKind::Length, nullptr, {}});
      break;
    case sched::FinishReason::Abort:
      end({FinishKind::Abort, nullptr, event.error.empty() ? "aborted" : event.error});
      break;
    case sched::FinishReason::Error:
    case sched::FinishReason::Rejected:
      end({FinishKind::Error, nullptr, event.error.empty() ? "engine error" : event.error,
           event.finish == sched::FinishReason::Rejected});
      break;
  }
  return false;
}

void ChoiceState::apply_token(const sched::TokenEvent& event, bool is_stop_token) {
  output_ids_.push_back(event.token);
  if (is_stop_token) return;
  if (keep_logprobs_) {
    tokens_.push_back({event.token, event.logprob, event.top, text_stream_.decoded_code_points()});
  }
  text_ += text_stream_.push(event.token);
}

void ChoiceState::finish_aborted(const std::string& message) {
  if (!finished()) end({FinishKind::Abort, nullptr, message});
}

void ChoiceState::end(Finish finish) {
  text_ += text_stream_.finish();
  finish_ = std::move(finish);
}

ChoiceState::Update ChoiceState::take_update() {
  Update update{std::string_view(text_).substr(sent_text_),
                std::span<const GeneratedToken>(tokens_).subspan(sent_tokens_), nullptr};
  sent_text_ = text_.size();
  sent_tokens_ = tokens_.size();
  if (finish_ && !sent_finish_) {
    update.finish = &*finish_;
    sent_finish_ = true;
  }
  return update;
}

}  // namespace mlaserve::server
