// Tokenizer::load: reads tokenizer.json and tokenizer_config.json into a TokenizerState.
#include <algorithm>
#include <fstream>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "tokenizer/byte_level.h"
#include "tokenizer/special_tokens.h"
#include "tokenizer/tiktoken_load.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/tokenizer_json.h"
#include "tokenizer/tokenizer_state.h"
#include "tokenizer/utf8.h"

namespace mlaserve::tokenizer {
namespace {

using nlohmann::json;
namespace fs = std::filesystem;

std::string read_file(const fs::path& path) {
  std::ifstream file(path, std::ios::binary | std::ios::ate);
  if (!file) fail("cannot open {}", path.string());
  std::string contents(static_cast<size_t>(file.tellg()), '\0');
  file.seekg(0);
  if (!file.read(contents.data(), static_cast<std::streamsize>(contents.size()))) {
    fail("cannot read {}", path.string());
  }
  return contents;
}

json read_json_file(const fs::path& path) {
  try {
    return json::parse(read_file(path));
  } catch (const json::exception& e) {
    fail("{} is not valid JSON: {}", path.string(), e.what());
  }
}

TokenizerJson read_tokenizer_json(const fs::path& path) {
  const std::string text = read_file(path);
  try {
    return parse_tokenizer_json(text);
  } catch (const Error& e) {
    fail("{}: {}", path.string(), e.what());
  }
}

// Only an empty normalizer is supported: DeepSeek's tokenizers normalize nothing.
void check_normalizer(const json& normalizer) {
  if (normalizer.is_null()) return;
  const std::string type = normalizer.at("type").get<std::string>();
  if (type != "Sequence") fail("normalizer type '{}' is not supported", type);
  for (const json& child : normalizer.at("normalizers")) check_normalizer(child);
}

void check_decoder(const json& decoder) {
  if (decoder.is_null()) fail("decoder is null; byte-level BPE needs a ByteLevel decoder");
  const std::string type = decoder.at("type").get<std::string>();
  if (type != "ByteLevel") fail("decoder type '{}' is not supported (only ByteLevel)", type);
}

std::vector<AddedToken> read_added_tokens(const json& list) {
  std::vector<AddedToken> tokens;
  for (const json& entry : list) {
    if (entry.value("single_word", false)) {
      fail("added token {} has single_word=true, which is not supported",
           entry.at("content").dump());
    }
    tokens.push_back({entry.at("id").get<int32_t>(), entry.at("content").get<std::string>(),
                      entry.value("special", false), entry.value("lstrip", false),
                      entry.value("rstrip", false), entry.value("normalized", false)});
    if (tokens.back().id < 0) fail("added token {} has a negative id", entry.at("content").dump());
  }
  return tokens;
}

std::vector<AddedToken> tokens_with_normalized(const std::vector<AddedToken>& tokens, bool value) {
  std::vector<AddedToken> selected;
  for (const AddedToken& token : tokens) {
    if (token.normalized == value) selected.push_back(token);
  }
  return selected;
}

// Fills the per-id tables from the vocabulary, then the added tokens, which take precedence.
void build_id_tables(TokenizerState& state) {
  int32_t max_id = -1;
  state.model.vocabulary().for_each(
      [&](std::string_view, int32_t id) { max_id = std::max(max_id, id); });
  for (const AddedToken& token : state.added_tokens) max_id = std::max(max_id, token.id);
  const auto size = static_cast<size_t>(max_id + 1);
  state.token_of_id.assign(size, {});
  state.known_id.assign(size, false);
  state.special_id.assign(size, false);
  auto set_token = [&](std::string_view token, int32_t id) {
    if (utf8::first_invalid_offset(token)) fail("token {} is not valid UTF-8", id);
    state.token_of_id[id] = token;
    state.known_id[id] = true;
  };
  state.model.vocabulary().for_each(set_token);
  for (const AddedToken& token : state.added_tokens) {
    set_token(token.content, token.id);
    state.special_id[token.id] = token.special;
  }
  state.bytes_of_id.resize(size);
  for (size_t id = 0; id < size; ++id) {
    state.bytes_of_id[id] = byte_level::symbols_to_bytes(state.token_of_id[id]);
  }
}

std::optional<std::string> read_template_source(const json& config, const fs::path& dir) {
  if (config.contains("chat_template") && !config["chat_template"].is_null()) {
    const json& value = config["chat_template"];
    if (value.is_string()) return value.get<std::string>();
    // A list of named templates: the one named "default" is what apply_chat_template uses.
    for (const json& named : value) {
      if (named.at("name") == "default") return named.at("template").get<std::string>();
    }
    fail("tokenizer_config.json chat_template has no template named 'default'");
  }
  const fs::path separate_file = dir / "chat_template.jinja";
  if (!fs::exists(separate_file)) return std::nullopt;
  return read_file(separate_file);
}

// DeepSeek-V3.2 and V4 ship no chat template: the model's config.json beside the tokenizer names
// the architecture whose built-in format replaces it (None when it names neither).
ChatFormatKind builtin_format_of_model(const fs::path& dir) {
  const fs::path config_path = dir / "config.json";
  if (!fs::exists(config_path)) return ChatFormatKind::None;
  const json config = read_json_file(config_path);
  if (!config.is_object()) return ChatFormatKind::None;
  const json architectures = config.value("architectures", json());
  const auto names = [&](const char* model_type, const char* architecture) {
    return config.value("model_type", json()) == model_type ||
           (architectures.is_array() &&
            std::any_of(architectures.begin(), architectures.end(),
                        [&](const json& name) { return name == architecture; }));
  };
  if (names("deepseek_v32", "DeepseekV32ForCausalLM")) return ChatFormatKind::DeepseekV32;
  if (names("deepseek_v4", "DeepseekV4ForCausalLM")) return ChatFormatKind::DeepseekV4;
  return ChatFormatKind::None;
}

}  // namespace

ChatTemplateSetup chat_setup_from_source(json special_token_variables, std::string source) {
  ChatTemplateSetup setup;
  setup.special_token_variables = std::move(special_token_variables);
  setup.kind = ChatFormatKind::Jinja;
  setup.source = std::move(source);
  // A template this interpreter cannot parse must not stop encode/decode from working, so the
  // error is kept and raised when the template is used.
  try {
    setup.chat_template.emplace(setup.source);
  } catch (const Error& e) {
    setup.unusable_reason = e.what();
  }
  return setup;
}

namespace {

ChatTemplateSetup read_chat_setup(const json& config, const fs::path& dir) {
  json special_token_variables = json::object();
  for (const char* key : {"bos_token", "eos_token", "pad_token", "unk_token"}) {
    if (const auto token = config_token(config, key)) special_token_variables[key] = *token;
  }
  if (std::optional<std::string> source = read_template_source(config, dir)) {
    return chat_setup_from_source(std::move(special_token_variables), std::move(*source));
  }
  ChatTemplateSetup setup;
  setup.special_token_variables = std::move(special_token_variables);
  setup.kind = builtin_format_of_model(dir);
  return setup;
}

std::shared_ptr<TokenizerState> tokenizer_json_state(const TokenizerJson& parsed) {
  const json& tokenizer = parsed.document;
  check_normalizer(tokenizer.value("normalizer", json()));
  check_decoder(tokenizer.value("decoder", json()));
  if (!parsed.vocab || !parsed.merges) fail("tokenizer.json has no model.vocab or no model.merges");
  return std::make_shared<TokenizerState>(
      BpeModel(tokenizer.at("model"), *parsed.vocab, *parsed.merges),
      PreTokenizer::from_json(tokenizer.value("pre_tokenizer", json())),
      read_added_tokens(tokenizer.value("added_tokens", json::array())));
}

// What both sources share: the id tables, the ids encode adds, BOS/EOS and the chat setup.
void finish_state(TokenizerState& state, const json& post_processor, const json& config,
                  const fs::path& dir) {
  build_id_tables(state);
  const TokenLookup lookup = [&](std::string_view token) { return state.find_token(token); };
  state.special_token_ids = special_token_ids(post_processor, config, lookup);
  if (const auto bos = config_token(config, "bos_token")) state.bos_id = lookup(*bos);
  if (const auto eos = config_token(config, "eos_token")) state.eos_id = lookup(*eos);
  state.chat = read_chat_setup(config, dir);
}

// tokenizer.json when the directory has one, else Kimi's tiktoken.model.
std::shared_ptr<TokenizerState> read_state(const fs::path& dir, const json& config) {
  const fs::path tokenizer_path = dir / "tokenizer.json";
  if (!fs::exists(tokenizer_path)) {
    const fs::path tiktoken_path = dir / "tiktoken.model";
    std::shared_ptr<TokenizerState> state =
        tiktoken_state(read_file(tiktoken_path), tiktoken_path.string(), config);
    finish_state(*state, json(), config, dir);
    return state;
  }
  const TokenizerJson tokenizer = read_tokenizer_json(tokenizer_path);
  std::shared_ptr<TokenizerState> state = tokenizer_json_state(tokenizer);
  finish_state(*state, tokenizer.document.value("post_processor", json()), config, dir);
  return state;
}

}  // namespace

TokenizerState::TokenizerState(BpeModel bpe, PreTokenizer pre, std::vector<AddedToken> added)
    : model(std::move(bpe)),
      pre_tokenizer(std::move(pre)),
      added_tokens(std::move(added)),
      raw_text_matcher(tokens_with_normalized(added_tokens, false)),
      normalized_text_matcher(tokens_with_normalized(added_tokens, true)) {
  for (const AddedToken& token : added_tokens) added_token_ids.insert(token.content, token.id);
}

Tokenizer Tokenizer::load(const fs::path& dir) {
  const fs::path config_path = dir / "tokenizer_config.json";
  const json config = fs::exists(config_path) ? read_json_file(config_path) : json::object();
  if (!fs::exists(dir / "tokenizer.json") && !fs::exists(dir / "tiktoken.model")) {
    fail("tokenizer directory {} has no tokenizer.json (nor a tiktoken.model)", dir.string());
  }
  try {
    return Tokenizer(read_state(dir, config));
  } catch (const json::exception& e) {
    fail("tokenizer in {} is malformed: {}", dir.string(), e.what());
  } catch (const Error& e) {
    fail("tokenizer in {}: {}", dir.string(), e.what());
  }
}

}  // namespace mlaserve::tokenizer
