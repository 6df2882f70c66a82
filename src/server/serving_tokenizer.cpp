#include "server/serving_tokenizer.h"

#include <spdlog/spdlog.h>

#include <fstream>
#include <sstream>

#include "core/error.h"

namespace mlaserve::server {

namespace {

const char* format_name(tokenizer::ChatFormatKind kind) {
  switch (kind) {
    case tokenizer::ChatFormatKind::None:
      return "none";
    case tokenizer::ChatFormatKind::Jinja:
      return "the Jinja chat template";
    case tokenizer::ChatFormatKind::DeepseekV32:
      return "DeepSeek-V3.2's encoder (built in)";
    case tokenizer::ChatFormatKind::DeepseekV4:
      return "DeepSeek-V4's encoder (built in)";
  }
  return "?";
}

}  // namespace

tokenizer::Tokenizer load_serving_tokenizer(const ServerOptions& options) {
  tokenizer::Tokenizer tok = tokenizer::Tokenizer::load(options.tokenizer_path);
  if (tokenizer::builtin_chat_format(options.chat_template) != tokenizer::ChatFormatKind::None) {
    tok = tok.with_chat_template(options.chat_template);
  } else if (!options.chat_template.empty()) {
    std::ifstream file(options.chat_template, std::ios::binary);
    if (!file) fail("--chat-template: cannot read {}", options.chat_template);
    std::ostringstream text;
    text << file.rdbuf();
    tok = tok.with_chat_template(text.str());
  }
  spdlog::info("serve: chat format {}{}", format_name(tok.chat_format()),
               tok.hybrid_thinking() ? ", thinking switched by chat_template_kwargs" : "");
  return tok;
}

}  // namespace mlaserve::server
