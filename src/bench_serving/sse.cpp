#include "bench_serving/sse.h"

namespace mlaserve::bench_serving {

std::vector<std::string> SseParser::feed(std::string_view bytes) {
  std::vector<std::string> payloads;
  size_t line_start = 0;
  for (size_t i = 0; i < bytes.size(); ++i) {
    if (bytes[i] != '\n') continue;
    partial_line_.append(bytes.substr(line_start, i - line_start));
    take_line(partial_line_, payloads);
    partial_line_.clear();
    line_start = i + 1;
  }
  partial_line_.append(bytes.substr(line_start));
  return payloads;
}

std::vector<std::string> SseParser::finish() {
  std::vector<std::string> payloads;
  take_line(partial_line_, payloads);
  partial_line_.clear();
  return payloads;
}

void SseParser::take_line(std::string_view line, std::vector<std::string>& payloads) const {
  if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
  constexpr std::string_view kData = "data:";
  if (!line.starts_with(kData)) return;
  line.remove_prefix(kData.size());
  if (line.starts_with(' ')) line.remove_prefix(1);  // the SSE spec strips one leading space
  payloads.emplace_back(line);
}

}  // namespace mlaserve::bench_serving
