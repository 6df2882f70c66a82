// A HuggingFace tokenizer.json tokenizer (byte-level BPE, as used by DeepSeek-V2/V3), with the
// chat template from tokenizer_config.json. Semantics follow HF `tokenizers` and Python
// `transformers`; see tests/data/tokenizer/README.md for what the golden cases check.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <nlohmann/json_fwd.hpp>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "tokenizer/chat_format.h"

namespace mlaserve::tokenizer {

struct TokenizerState;
struct ChatTemplateSetup;

// Immutable once loaded and cheap to copy (copies share the loaded tables); encode and decode
// may run on several threads at once.
class Tokenizer {
 public:
  // Loads `dir`/tokenizer.json and, if present, `dir`/tokenizer_config.json (BOS/EOS, whether
  // encode adds them, and the chat template). Throws mlaserve::Error naming the file and the
  // unsupported or malformed part.
  static Tokenizer load(const std::filesystem::path& dir);

  // Encodes UTF-8 text (an Error if it is not valid UTF-8). add_special_tokens adds what HF
  // Python adds: BOS/EOS per tokenizer_config's add_bos_token/add_eos_token when it has them,
  // otherwise what tokenizer.json's post_processor adds.
  std::vector<int32_t> encode(std::string_view text, bool add_special_tokens) const;

  // Decodes ids to text; byte sequences that are not valid UTF-8 become U+FFFD. An id that is
  // not in the vocabulary is an Error. skip_special_tokens drops added tokens marked special.
  std::string decode(std::span<const int32_t> ids, bool skip_special_tokens) const;

  int32_t vocab_size() const;  // largest id + 1
  std::optional<int32_t> bos_id() const;
  std::optional<int32_t> eos_id() const;
  std::optional<int32_t> token_to_id(std::string_view token) const;
  std::string id_to_token(int32_t id) const;  // vocabulary spelling, e.g. "Ġthe"
  // The raw bytes `id` decodes to (possibly part of a UTF-8 character).
  std::string_view id_to_bytes(int32_t id) const;
  bool is_special(int32_t id) const;  // dropped by skip_special_tokens

  // True when tokenizer_config has a chat template, even one outside the supported Jinja subset
  // (apply_chat_template then says what is unsupported), or a built-in format replaces it.
  bool has_chat_template() const;
  // Which format renders chats: a Jinja template, or (a model directory whose config.json says
  // model_type deepseek_v32 or deepseek_v4 and that has no template) the built-in DeepSeek-V3.2
  // or V4 encoder.
  ChatFormatKind chat_format() const;
  // True when the chat format switches thinking on and off by chat_template_kwargs (a template
  // that reads "thinking" or "enable_thinking", such as DeepSeek-V3.1's; DeepSeek-V3.2's and V4's
  // formats).
  bool hybrid_thinking() const;
  // This tokenizer with another chat format (serve --chat-template): `source` is a Jinja
  // template's text, or "deepseek-v32" / "deepseek-v4" for a built-in DeepSeek encoder.
  Tokenizer with_chat_template(std::string source) const;
  // Renders a chat with the chat format. Jinja templates get the variables HF passes plus the
  // input's kwargs (one named like those is an Error); DeepSeek-V3.2's and V4's encoders are in
  // thinking mode when thinking_requested(kwargs), V4's takes the kwargs' "reasoning_effort"
  // (dsv4::reasoning_effort_of), and the tools join the first system message (a system message
  // is put first when there is none), as SGLang and vLLM pass them.
  std::string render_chat(const ChatInput& input) const;
  // Renders the chat template for `messages` (a JSON array of {role, content, ...}) with the
  // variables HF passes: messages, add_generation_prompt, bos_token, eos_token, pad_token,
  // unk_token, and `tools` (OpenAI function definitions) when given.
  std::string apply_chat_template(const nlohmann::json& messages, bool add_generation_prompt,
                                  const nlohmann::json* tools = nullptr) const;
  // The chat template's text ("" without one), e.g. to tell which tool-call syntax it renders.
  const std::string& chat_template_source() const;

 private:
  explicit Tokenizer(std::shared_ptr<const TokenizerState> state);
  void check_id(int32_t id) const;
  std::shared_ptr<const TokenizerState> state_;
  std::shared_ptr<const ChatTemplateSetup> chat_;  // the state's, or --chat-template's
};

// Decodes a stream of ids one at a time (for streaming generation): each push returns the text
// that is complete so far and holds back the bytes of a character that is not finished yet.
// The concatenation of all pushes and the final flush equals Tokenizer::decode of all the ids.
class IncrementalDecoder {
 public:
  IncrementalDecoder(const Tokenizer& tokenizer, bool skip_special_tokens);
  std::string push(int32_t id);
  // Returns what was held back, with U+FFFD for an unfinished character, and resets.
  std::string flush();

 private:
  Tokenizer tokenizer_;
  bool skip_special_tokens_;
  std::string pending_;  // the start of an unfinished UTF-8 character
};

}  // namespace mlaserve::tokenizer
