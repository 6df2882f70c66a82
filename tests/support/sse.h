// Server-sent event streams as the server writes them: "data: <payload>\n\n" events, the last
// one "data: [DONE]" (OpenAI's chat and SGLang), or named events "event: NAME\ndata: <payload>\n\n"
// with no terminator (the Responses and Anthropic APIs).
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace mlaserve::testing {

// A stream's JSON events in order, whether `data: [DONE]` ended it, and its HTTP status (0 when
// parsed from a body alone).
struct EventStream {
  std::vector<nlohmann::json> events;
  bool done = false;
  int status = 0;
};

// Parses a stream body, failing the test on a block that is not one `data: ` event, on an event
// after [DONE] and on a payload that is not JSON.
EventStream parse_event_stream(const std::string& body);

// The JSON events of a stream body, failing the test also when [DONE] does not end it.
std::vector<nlohmann::json> sse_json_events(const std::string& body);

struct NamedEvent {
  std::string name;
  nlohmann::json data;
};

// The named events of a stream body, failing the test on a block that is not one "event: " line
// and one "data: " line, on a payload that is not JSON, on a "data: [DONE]" and on an event whose
// data's "type" is not its name.
std::vector<NamedEvent> named_events(const std::string& body);

}  // namespace mlaserve::testing
