// Turns the timed chunks of one streamed response into TTFT, inter-token latencies and the
// generated text, with SGLang's rules: TTFT is the time to the first chunk that carries tokens;
// each later chunk carrying k tokens adds k equal gaps of (its time - the previous chunk's
// time) / k, so a server that sends several tokens per chunk is not credited with zero-gap
// tokens; chunks without tokens change nothing.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "bench_serving/backend.h"

namespace mlaserve::bench_serving {

class StreamTimer {
 public:
  // `seconds` is the chunk's arrival time, measured from when the request was sent.
  void add(const ChunkDelta& delta, double seconds);

  bool has_tokens() const { return tokens_ > 0; }
  double ttft() const { return ttft_; }
  const std::vector<double>& itl() const { return itl_; }
  const std::string& text() const { return text_; }
  // The server's count when it reported one, else the tokens the chunks carried.
  int64_t output_tokens() const { return reported_tokens_.value_or(tokens_); }
  int64_t spec_verify_ct() const { return spec_verify_ct_; }

 private:
  int64_t spec_verify_ct_ = 0;
  double ttft_ = 0.0;
  double last_chunk_ = 0.0;
  int64_t tokens_ = 0;
  std::optional<int64_t> reported_tokens_;
  std::vector<double> itl_;
  std::string text_;
};

}  // namespace mlaserve::bench_serving
