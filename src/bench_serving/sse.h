// Splits a server-sent-events byte stream into its "data:" payloads. Bytes arrive in arbitrary
// pieces (a line may be cut anywhere), so unfinished lines are kept for the next feed.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace mlaserve::bench_serving {

class SseParser {
 public:
  // Returns the payloads of the "data:" lines that these bytes complete, in order. Each data
  // line is handed out as soon as its newline arrives, not at the blank line that ends the
  // event: the servers we measure send one data line per event, and this gives each chunk the
  // time its bytes arrived (SGLang's client also reads line by line). Comments (":...") and
  // other fields (event:, id:, retry:) are skipped.
  std::vector<std::string> feed(std::string_view bytes);
  // The payload of a last data line that the stream ended without a newline, if any.
  std::vector<std::string> finish();

 private:
  void take_line(std::string_view line, std::vector<std::string>& payloads) const;
  std::string partial_line_;
};

}  // namespace mlaserve::bench_serving
