#include "server/generation_format.h"

namespace mlaserve::server {

std::vector<nlohmann::json> GenerationFormat::stream_start(const GenerationBatch&) const {
  return {};
}

std::vector<nlohmann::json> GenerationFormat::stream_end(const GenerationBatch&) const {
  return {};
}

}  // namespace mlaserve::server
