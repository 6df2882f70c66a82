// mlaserve tokenize / detokenize / apply-chat-template: the tokenizer on JSON files, for scripts
// and for checking the engine's tokenizer against other implementations.
#include <cstdio>
#include <memory>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "tokenizer/tokenizer.h"
#include "tools/commands.h"
#include "tools/json_input.h"

namespace mlaserve::tools {
namespace {

using nlohmann::json;
using tokenizer::Tokenizer;

struct TokenizerCommandOptions {
  std::string tokenizer_dir;
  std::string input;
  bool flag = false;  // --add-special-tokens, --skip-special-tokens or --add-generation-prompt
};

void print(const std::string& text) {
  std::fwrite(text.data(), 1, text.size(), stdout);
}

void run_tokenize(const TokenizerCommandOptions& options) {
  const json strings = read_json_file(options.input);
  if (!strings.is_array()) fail("{}: expected a JSON array of strings", options.input);
  const Tokenizer tok = Tokenizer::load(options.tokenizer_dir);
  json ids = json::array();
  for (size_t i = 0; i < strings.size(); ++i) {
    if (!strings[i].is_string()) {
      fail("{}: item {} has JSON type {}, expected a string", options.input, i,
           strings[i].type_name());
    }
    ids.push_back(tok.encode(strings[i].get_ref<const std::string&>(), options.flag));
  }
  print(json{{"ids", ids}}.dump() + "\n");
}

void run_detokenize(const TokenizerCommandOptions& options) {
  const json sequences = read_json_file(options.input);
  if (!sequences.is_array())
    fail("{}: expected a JSON array of arrays of token ids", options.input);
  const Tokenizer tok = Tokenizer::load(options.tokenizer_dir);
  json texts = json::array();
  for (size_t i = 0; i < sequences.size(); ++i) {
    const std::vector<int32_t> ids =
        read_token_ids(sequences[i], fmt::format("{}: item {}", options.input, i));
    try {
      texts.push_back(tok.decode(ids, options.flag));
    } catch (const Error& e) {
      fail("{}: item {}: {}", options.input, i, e.what());
    }
  }
  print(json{{"texts", texts}}.dump() + "\n");
}

void check_messages(const json& messages, const std::string& path) {
  if (!messages.is_array()) fail("{}: expected a JSON array of {{role, content}} messages", path);
  for (size_t i = 0; i < messages.size(); ++i) {
    if (!messages[i].is_object() || !messages[i].contains("role") ||
        !messages[i]["role"].is_string()) {
      fail("{}: message {} must be an object with a string \"role\"", path, i);
    }
  }
}

void run_apply_chat_template(const TokenizerCommandOptions& options) {
  const json messages = read_json_file(options.input);
  check_messages(messages, options.input);
  const Tokenizer tok = Tokenizer::load(options.tokenizer_dir);
  print(tok.apply_chat_template(messages, options.flag));
}

// Adds a subcommand with the --tokenizer option and one input file option; `run` gets the options.
CLI::App* add_command(CLI::App& app, const char* name, const char* description,
                      const char* input_flag, const char* input_help,
                      void (*run)(const TokenizerCommandOptions&),
                      std::shared_ptr<TokenizerCommandOptions> options) {
  CLI::App* command = app.add_subcommand(name, description);
  command
      ->add_option("--tokenizer", options->tokenizer_dir,
                   "Directory with tokenizer.json and, optionally, tokenizer_config.json (BOS/EOS "
                   "settings and the chat template), e.g. a HuggingFace model directory")
      ->required();
  command->add_option(input_flag, options->input, input_help)->required();
  command->callback([options, run] { run(*options); });
  return command;
}

}  // namespace

void add_tokenizer_commands(CLI::App& app) {
  auto tokenize = std::make_shared<TokenizerCommandOptions>();
  add_command(app, "tokenize",
              "Encode strings to token ids; prints {\"ids\": [[...], ...]} (one list per string)",
              "--input", "JSON file holding an array of strings to encode", run_tokenize, tokenize)
      ->add_flag("--add-special-tokens", tokenize->flag,
                 "Add what HF adds with add_special_tokens=True: BOS/EOS as tokenizer_config's "
                 "add_bos_token/add_eos_token say (else the tokenizer.json post-processor)");

  auto detokenize = std::make_shared<TokenizerCommandOptions>();
  add_command(app, "detokenize",
              "Decode token ids to text; prints {\"texts\": [...]} (one string per id list)",
              "--input", "JSON file holding an array of arrays of token ids", run_detokenize,
              detokenize)
      ->add_flag("--skip-special-tokens", detokenize->flag,
                 "Drop added tokens marked special (BOS, EOS, padding, ...) from the text");

  auto chat = std::make_shared<TokenizerCommandOptions>();
  add_command(app, "apply-chat-template",
              "Render the tokenizer's chat template for a conversation; prints the prompt text "
              "exactly, with no newline added",
              "--messages", "JSON file holding an array of messages, each {\"role\", \"content\"}",
              run_apply_chat_template, chat)
      ->add_flag("--add-generation-prompt", chat->flag,
                 "End the prompt with the assistant turn's opening, so the model answers next");
}

}  // namespace mlaserve::tools
