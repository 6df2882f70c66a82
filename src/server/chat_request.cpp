#include "server/chat_request.h"

#include <utility>
#include <vector>

#include "server/openai_handlers.h"

namespace mlaserve::server {

namespace {

// Whether the answer begins with reasoning. A chat format with a thinking switch (DeepSeek-V3.1's
// template, V3.2's format) thinks exactly when the template variables turn thinking on, whatever
// the reasoning parser; otherwise --reasoning-parser deepseek-r1 always splits, deepseek-v3 when
// thinking is on.
bool splits_reasoning(const ServerContext& context, bool thinking) {
  if (context.tokenizer.hybrid_thinking()) return thinking;
  const std::string& parser = context.options.reasoning_parser;
  return parser == "deepseek-r1" || (parser == "deepseek-v3" && thinking);
}

}  // namespace

Prompt render_chat_request(const ChatRequest& request, const tokenizer::Tokenizer& tokenizer) {
  return chat_prompt(request.messages, tokenizer,
                     request.tools ? request.tools->tools : nlohmann::ordered_json(),
                     request.template_kwargs);
}

void run_chat(ServerContext& context, const httplib::Request& http_request,
              httplib::Response& response, ChatRequest request, const std::string& id,
              int64_t default_max_tokens, const ChatFormatFactory& make_format) {
  const bool thinking = tokenizer::thinking_requested(request.template_kwargs);
  // The prompt ends in an open thinking block only where the format has the switch: a forced
  // call then closes it first.
  if (request.tools) request.tools->thinking = thinking && context.tokenizer.hybrid_thinking();
  if (grammar::GrammarPtr grammar =
          chat_output_grammar(request.tools, request.output_format, context.grammars)) {
    request.options.make_constraint = context.grammars.constraints(std::move(grammar));
  }
  const std::vector<Prompt> prompts = {render_chat_request(request, context.tokenizer)};
  ChatParsing parsing{splits_reasoning(context, thinking), std::nullopt};
  if (request.tools && request.tools->parses_calls()) parsing.tool_calls = request.tools->syntax;
  run_openai_generation(context, http_request, response, prompts, request.options,
                        default_max_tokens, id, make_format(request, parsing),
                        request.max_tokens_field);
}

}  // namespace mlaserve::server
