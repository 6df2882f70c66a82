#include "tokenizer/tokenizer.h"

#include <deque>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "tokenizer/tokenizer_state.h"
#include "tokenizer/utf8.h"

namespace mlaserve::tokenizer {

std::optional<int32_t> TokenizerState::find_token(std::string_view token) const {
  if (const auto added = added_token_ids.find(token)) return added;
  return model.vocabulary().find(token);
}

Tokenizer::Tokenizer(std::shared_ptr<const TokenizerState> state) : state_(std::move(state)) {}

std::vector<int32_t> Tokenizer::encode(std::string_view text, bool add_special_tokens) const {
  if (const auto bad = utf8::first_invalid_offset(text)) {
    fail("cannot encode: the text is not valid UTF-8 (byte offset {})", *bad);
  }
  // HF matches added tokens with normalized=false in the raw text first, then those with
  // normalized=true in the normalized rest; the normalizer is always empty here.
  std::vector<TextSegment> raw_segments;
  state_->raw_text_matcher.split(text, raw_segments);
  std::vector<TextSegment> segments;
  for (const TextSegment& segment : raw_segments) {
    if (segment.added_token_id) {
      segments.push_back(segment);
    } else {
      state_->normalized_text_matcher.split(segment.text, segments);
    }
  }

  const SpecialTokenIds& special = state_->special_token_ids;
  std::vector<int32_t> ids;
  ids.reserve(text.size() / 3 + special.prefix.size() + special.suffix.size());
  if (add_special_tokens) ids.insert(ids.end(), special.prefix.begin(), special.prefix.end());
  std::deque<std::string> arena;
  const PreTokenizer::PieceSink encode_piece = [&](std::string_view piece) {
    state_->model.encode(piece, ids);
  };
  for (const TextSegment& segment : segments) {
    if (segment.added_token_id) {
      ids.push_back(*segment.added_token_id);
    } else {
      state_->pre_tokenizer.split(segment.text, encode_piece, arena);
    }
  }
  if (add_special_tokens) ids.insert(ids.end(), special.suffix.begin(), special.suffix.end());
  return ids;
}

std::string Tokenizer::decode(std::span<const int32_t> ids, bool skip_special_tokens) const {
  std::string bytes;
  for (const int32_t id : ids) {
    check_id(id);
    if (skip_special_tokens && state_->special_id[id]) continue;
    bytes += state_->bytes_of_id[id];
  }
  std::string text;
  text.reserve(bytes.size());
  utf8::append_lossy(text, bytes);
  return text;
}

void Tokenizer::check_id(int32_t id) const {
  if (id < 0 || id >= vocab_size() || !state_->known_id[id]) {
    fail("token id {} is not in the vocabulary (ids run from 0 to {})", id, vocab_size() - 1);
  }
}

int32_t Tokenizer::vocab_size() const {
  return static_cast<int32_t>(state_->token_of_id.size());
}

std::optional<int32_t> Tokenizer::bos_id() const {
  return state_->bos_id;
}

std::optional<int32_t> Tokenizer::eos_id() const {
  return state_->eos_id;
}

std::optional<int32_t> Tokenizer::token_to_id(std::string_view token) const {
  return state_->find_token(token);
}

std::string Tokenizer::id_to_token(int32_t id) const {
  check_id(id);
  return state_->token_of_id[id];
}

std::string_view Tokenizer::id_to_bytes(int32_t id) const {
  check_id(id);
  return state_->bytes_of_id[id];
}

bool Tokenizer::is_special(int32_t id) const {
  check_id(id);
  return state_->special_id[id];
}

bool Tokenizer::has_chat_template() const {
  return state_->chat.chat_template.has_value() || !state_->chat.unusable_reason.empty();
}

std::string Tokenizer::apply_chat_template(const nlohmann::json& messages,
                                           bool add_generation_prompt,
                                           const nlohmann::json* tools) const {
  const ChatTemplateSetup& chat = state_->chat;
  if (!chat.unusable_reason.empty()) fail("cannot use the chat template: {}", chat.unusable_reason);
  if (!chat.chat_template) fail("the tokenizer has no chat template");
  if (!messages.is_array())
    fail("chat messages must be a JSON array, got {}", messages.type_name());
  nlohmann::json variables = chat.special_token_variables;
  variables["messages"] = messages;
  variables["add_generation_prompt"] = add_generation_prompt;
  if (tools) variables["tools"] = *tools;
  return chat.chat_template->render(variables);
}

const std::string& Tokenizer::chat_template_source() const {
  return state_->chat.source;
}

IncrementalDecoder::IncrementalDecoder(const Tokenizer& tokenizer, bool skip_special_tokens)
    : tokenizer_(tokenizer), skip_special_tokens_(skip_special_tokens) {}

std::string IncrementalDecoder::push(int32_t id) {
  if (skip_special_tokens_ && tokenizer_.is_special(id)) return {};
  pending_ += tokenizer_.id_to_bytes(id);
  const size_t held_back = utf8::incomplete_tail_length(pending_);
  std::string text;
  utf8::append_lossy(text, std::string_view(pending_).substr(0, pending_.size() - held_back));
  pending_.erase(0, pending_.size() - held_back);
  return text;
}

std::string IncrementalDecoder::flush() {
  std::string text;
  utf8::append_lossy(text, pending_);
  pending_.clear();
  return text;
}

}  // namespace mlaserve::tokenizer
