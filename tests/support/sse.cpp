#include "support/sse.h"

#include <gtest/gtest.h>

#include <algorithm>

namespace mlaserve::testing {

EventStream parse_event_stream(const std::string& body) {
  EventStream stream;
  size_t at = 0;
  while (at < body.size()) {
    const size_t end = body.find("\n\n", at);
    const std::string block = body.substr(at, end - at);
    at = end == std::string::npos ? body.size() : end + 2;
    EXPECT_EQ(block.rfind("data: ", 0), 0u) << block;
    EXPECT_FALSE(stream.done) << "an event after [DONE]: " << block;
    const std::string data = block.substr(std::min<size_t>(6, block.size()));
    if (data == "[DONE]") {
      stream.done = true;
    } else {
      stream.events.push_back(nlohmann::json::parse(data, nullptr, /*allow_exceptions=*/false));
      EXPECT_FALSE(stream.events.back().is_discarded()) << block;
    }
  }
  return stream;
}

std::vector<nlohmann::json> sse_json_events(const std::string& body) {
  EventStream stream = parse_event_stream(body);
  EXPECT_TRUE(stream.done) << "no [DONE] at the end of\n" << body;
  return std::move(stream.events);
}

std::vector<NamedEvent> named_events(const std::string& body) {
  std::vector<NamedEvent> events;
  size_t at = 0;
  while (at < body.size()) {
    const size_t end = body.find("\n\n", at);
    const std::string block = body.substr(at, end - at);
    at = end == std::string::npos ? body.size() : end + 2;
    const size_t newline = block.find('\n');
    EXPECT_EQ(block.rfind("event: ", 0), 0u) << block;
    EXPECT_NE(newline, std::string::npos) << block;
    if (block.rfind("event: ", 0) != 0 || newline == std::string::npos) continue;
    NamedEvent event{block.substr(7, newline - 7), nullptr};
    const std::string data_line = block.substr(newline + 1);
    EXPECT_EQ(data_line.rfind("data: ", 0), 0u) << block;
    event.data = nlohmann::json::parse(data_line.substr(std::min<size_t>(6, data_line.size())),
                                       nullptr, /*allow_exceptions=*/false);
    EXPECT_FALSE(event.data.is_discarded()) << block;
    EXPECT_EQ(event.data.value("type", ""), event.name) << block;
    events.push_back(std::move(event));
  }
  return events;
}

}  // namespace mlaserve::testing
