// How an API shapes a generation's results: one JSON body, or the events of a stream.
#pragma once

#include <cstddef>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "server/api_error.h"
#include "server/choice_state.h"
#include "server/generation_batch.h"
#include "server/http_response.h"

namespace mlaserve::server {

class GenerationFormat {
 public:
  virtual ~GenerationFormat() = default;

  // The body of a non-streaming response once every choice has finished.
  virtual nlohmann::json response(const GenerationBatch& batch) const = 0;

  // Events sent before any generated text (e.g. the chat role, an echoed prompt).
  virtual std::vector<SseEvent> stream_start(const GenerationBatch& batch) const;
  // The events for what choice `index` produced since its last events.
  virtual std::vector<SseEvent> stream_update(const GenerationBatch& batch, size_t index,
                                              const ChoiceState::Update& update) const = 0;
  // Events after every choice has finished (e.g. usage).
  virtual std::vector<SseEvent> stream_end(const GenerationBatch& batch) const;
  // The events of a stream that fails after it began: by default the API's error body.
  virtual std::vector<SseEvent> stream_error(const ApiError& error) const;
  // What a stream ends with after its last event: OpenAI's chat and SGLang's "data: [DONE]".
  virtual std::string_view stream_terminator() const { return kSseDone; }
};

}  // namespace mlaserve::server
