// What every route handler shares: options, the engine, the tokenizer and server-wide state.
#pragma once

#include <atomic>
#include <chrono>
#include <string>

#include "sched/generation.h"
#include "server/metrics.h"
#include "server/request_registry.h"
#include "server/response_store.h"
#include "server/server_options.h"
#include "server/structured_output.h"
#include "tokenizer/tokenizer.h"

namespace mlaserve::server {

struct ServerContext {
  ServerContext(ServerOptions options, sched::EngineHandle& engine,
                const tokenizer::Tokenizer& tokenizer);

  // The name in /v1/models and responses: --model-name, else the model path.
  std::string served_model_name() const;
  // OpenAI clients may name the model by its served name or by its path.
  bool is_served_model(const std::string& name) const;

  ServerOptions options;  // fixed once serving starts (start() records the bound port)
  sched::EngineHandle& engine;
  const tokenizer::Tokenizer& tokenizer;
  Metrics metrics;
  RequestRegistry registry;
  CompiledGrammars grammars;          // structured output's compiled grammars
  ResponseStore responses;            // the Responses API's stored responses
  std::atomic<bool> stopping{false};  // set by stop(): waiting handlers give up
  std::atomic<int> open_streams{0};   // streaming responses not yet ended
  const std::chrono::system_clock::time_point started = std::chrono::system_clock::now();
};

}  // namespace mlaserve::server
