#include "server/server_context.h"

#include <utility>

#include "server/tool_calls.h"

namespace mlaserve::server {

ServerContext::ServerContext(ServerOptions options, sched::EngineHandle& engine,
                             const tokenizer::Tokenizer& tokenizer)
    : options(std::move(options)),
      engine(engine),
      tokenizer(tokenizer),
      grammars(tokenizer, deepseek_v3::kMarkerTokens) {}

std::string ServerContext::served_model_name() const {
  if (!options.model_name.empty()) return options.model_name;
  if (!options.model_path.empty()) return options.model_path;
  return "mlaserve";
}

bool ServerContext::is_served_model(const std::string& name) const {
  return name == served_model_name() || (!options.model_path.empty() && name == options.model_path);
}

}  // namespace mlaserve::server
