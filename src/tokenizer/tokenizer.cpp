#include "tokenizer/tokenizer.h"

#include <deque>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "tokenizer/deepseek_v32_encoding.h"
#include "tokenizer/deepseek_v4_encoding.h"
#include "tokenizer/tokenizer_state.h"
#include "tokenizer/utf8.h"

namespace mlaserve::tokenizer {

std::optional<int32_t> TokenizerState::find_token(std::string_view token) const {
  if (const auto added = added_token_ids.find(token)) return added;
  return model.vocabulary().find(token);
}

Tokenizer::Tokenizer(std::shared_ptr<const TokenizerState> state)
    : state_(std::move(state)), chat_(state_, &state_->chat) {}

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
  return chat_->kind != ChatFormatKind::None;
}

ChatFormatKind Tokenizer::chat_format() const {
  return chat_->kind;
}

bool Tokenizer::hybrid_thinking() const {
  if (chat_->kind == ChatFormatKind::DeepseekV32 || chat_->kind == ChatFormatKind::DeepseekV4) {
    return true;
  }
  return chat_->kind == ChatFormatKind::Jinja &&
         (chat_->source.find("thinking is defined") != std::string::npos ||
          chat_->source.find("enable_thinking") != std::string::npos);
}

Tokenizer Tokenizer::with_chat_template(std::string source) const {
  Tokenizer copy = *this;
  if (const ChatFormatKind builtin = builtin_chat_format(source); builtin != ChatFormatKind::None) {
    auto setup = std::make_shared<ChatTemplateSetup>();
    setup->kind = builtin;
    setup->special_token_variables = chat_->special_token_variables;
    copy.chat_ = std::move(setup);
  } else {
    copy.chat_ = std::make_shared<const ChatTemplateSetup>(
        chat_setup_from_source(chat_->special_token_variables, std::move(source)));
  }
  return copy;
}

namespace {

// DeepSeek-V3.2's and V4's encoders take the tools in a system message: the first one, else a
// new one.
nlohmann::ordered_json with_tools_in_system(const ChatInput& input) {
  nlohmann::ordered_json messages = input.messages;
  if (input.tools.is_null() || input.tools.empty()) return messages;
  if (!messages.empty() && messages[0].is_object() && messages[0].value("role", "") == "system") {
    messages[0]["tools"] = input.tools;
  } else {
    messages.insert(messages.begin(),
                    nlohmann::ordered_json{{"role", "system"}, {"tools", input.tools}});
  }
  return messages;
}

}  // namespace

std::string Tokenizer::render_chat(const ChatInput& input) const {
  const ChatTemplateSetup& chat = *chat_;
  if (!input.messages.is_array())
    fail("chat messages must be a JSON array, got {}", input.messages.type_name());
  if (!input.kwargs.is_object()) fail("chat template kwargs must be a JSON object");
  if (chat.kind == ChatFormatKind::DeepseekV32) {
    dsv32::EncodeOptions options;
    options.thinking_mode = thinking_requested(input.kwargs) ? dsv32::ThinkingMode::Thinking
                                                             : dsv32::ThinkingMode::Chat;
    return dsv32::encode_messages(with_tools_in_system(input), options);
  }
  if (chat.kind == ChatFormatKind::DeepseekV4) {
    dsv4::EncodeOptions options;
    options.thinking_mode =
        thinking_requested(input.kwargs) ? dsv4::ThinkingMode::Thinking : dsv4::ThinkingMode::Chat;
    options.reasoning_effort = dsv4::reasoning_effort_of(input.kwargs);
    return dsv4::encode_messages(with_tools_in_system(input), options);
  }
  if (!chat.unusable_reason.empty()) fail("cannot use the chat template: {}", chat.unusable_reason);
  if (!chat.chat_template) fail("the tokenizer has no chat template");
  nlohmann::ordered_json variables =
      nlohmann::ordered_json::parse(chat.special_token_variables.dump());
  for (const auto& [name, value] : input.kwargs.items()) {
    if (is_reserved_chat_variable(name))
      fail("chat template kwargs may not set '{}', which the server passes itself", name);
    variables[name] = value;
  }
  variables["messages"] = input.messages;
  variables["add_generation_prompt"] = input.add_generation_prompt;
  if (!input.tools.is_null()) variables["tools"] = input.tools;
  return chat.chat_template->render(variables);
}

std::string Tokenizer::apply_chat_template(const nlohmann::json& messages,
                                           bool add_generation_prompt,
                                           const nlohmann::json* tools) const {
  if (!messages.is_array())
    fail("chat messages must be a JSON array, got {}", messages.type_name());
  if (chat_->kind == ChatFormatKind::Jinja) {
    const ChatTemplateSetup& chat = *chat_;
    if (!chat.unusable_reason.empty())
      fail("cannot use the chat template: {}", chat.unusable_reason);
    nlohmann::json variables = chat.special_token_variables;
    variables["messages"] = messages;
    variables["add_generation_prompt"] = add_generation_prompt;
    if (tools) variables["tools"] = *tools;
    return chat.chat_template->render(variables);
  }
  ChatInput input;
  input.messages = nlohmann::ordered_json::parse(messages.dump());
  if (tools) input.tools = nlohmann::ordered_json::parse(tools->dump());
  input.add_generation_prompt = add_generation_prompt;
  return render_chat(input);
}

const std::string& Tokenizer::chat_template_source() const {
  return chat_->source;
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
