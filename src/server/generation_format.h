// How an API shapes a generation's results: one JSON body, or the events of a stream.
#pragma once

#include <cstddef>
#include <vector>

#include <nlohmann/json.hpp>

#include "server/choice_state.h"
#include "server/generation_batch.h"

namespace mlaserve::server {

class GenerationFormat {
 public:
  virtual ~GenerationFormat() = default;

  // The body of a non-streaming response once every choice has finished.
  virtual nlohmann::json response(const GenerationBatch& batch) const = 0;

  // Events sent before any generated text (e.g. the chat role, an echoed prompt).
  virtual std::vector<nlohmann::json> stream_start(const GenerationBatch& batch) const;
  // The event for what choice `index` produced since its last event.
  virtual nlohmann::json stream_update(const GenerationBatch& batch, size_t index,
                                       const ChoiceState::Update& update) const = 0;
  // Events after every choice has finished, before [DONE] (e.g. usage).
  virtual std::vector<nlohmann::json> stream_end(const GenerationBatch& batch) const;
};

}  // namespace mlaserve::server
