// The handlers behind the OpenAI routes, and what they share.
#pragma once

#include <httplib.h>

#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "server/generation_format.h"
#include "server/generation_options.h"
#include "server/prompt_input.h"
#include "server/server_context.h"

namespace mlaserve::server {

struct ChatRequest;

// A /v1/chat/completions body as a chat request (400 naming the field for anything malformed).
ChatRequest parse_chat_completions_request(const nlohmann::json& body, const OrderedBody& ordered,
                                           const tokenizer::Tokenizer& tokenizer);

void handle_completions(ServerContext& context, const httplib::Request& request,
                        httplib::Response& response);
void handle_chat_completions(ServerContext& context, const httplib::Request& request,
                             httplib::Response& response);

// 404 model_not_found when "model" names a model this server does not serve.
void check_model(const nlohmann::json& body, const ServerContext& context);

// What the response bodies of both routes start with.
struct OpenAiResponseHeader {
  std::string id;
  int64_t created;
  std::string model;
  nlohmann::json json(const char* object) const;
};

// Submits n choices per prompt under `header.id` and responds through `format`. `budget_param`
// names the request's maximum-tokens field in errors.
void run_openai_generation(ServerContext& context, const httplib::Request& request,
                           httplib::Response& response, const std::vector<Prompt>& prompts,
                           const GenerationOptions& options, int64_t default_max_tokens,
                           const std::string& id, std::shared_ptr<const GenerationFormat> format,
                           const std::string& budget_param = "max_tokens");

}  // namespace mlaserve::server
