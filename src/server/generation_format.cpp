#include "server/generation_format.h"

namespace mlaserve::server {

std::vector<SseEvent> GenerationFormat::stream_start(const GenerationBatch&) const {
  return {};
}

std::vector<SseEvent> GenerationFormat::stream_end(const GenerationBatch&) const {
  return {};
}

std::vector<SseEvent> GenerationFormat::stream_error(const ApiError& error) const {
  return {error.to_json()};
}

}  // namespace mlaserve::server
