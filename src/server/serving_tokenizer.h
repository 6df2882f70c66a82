// The tokenizer `serve` answers with: --tokenizer's directory (the model's by default), with the
// chat format --chat-template names when given.
#pragma once

#include "server/server_options.h"
#include "tokenizer/tokenizer.h"

namespace mlaserve::server {

// options.chat_template: a Jinja file whose text replaces the model's chat template, or
// "deepseek-v32" / "deepseek-v4" for a built-in DeepSeek format; empty: the model's own (its
// template, else the built-in format its config.json's model_type calls for). A file that cannot be
// read is an mlaserve::Error naming it.
tokenizer::Tokenizer load_serving_tokenizer(const ServerOptions& options);

}  // namespace mlaserve::server
