#include "bench_serving/stream_timer.h"

namespace mlaserve::bench_serving {

void StreamTimer::add(const ChunkDelta& delta, double seconds) {
  text_ += delta.text;
  if (delta.completion_tokens) reported_tokens_ = delta.completion_tokens;
  if (delta.spec_verify_ct) spec_verify_ct_ = *delta.spec_verify_ct;
  if (delta.new_tokens <= 0) return;
  if (tokens_ == 0) {
    ttft_ = seconds;
  } else {
    const double gap = (seconds - last_chunk_) / static_cast<double>(delta.new_tokens);
    itl_.insert(itl_.end(), static_cast<size_t>(delta.new_tokens), gap);
  }
  last_chunk_ = seconds;
  tokens_ += delta.new_tokens;
}

}  // namespace mlaserve::bench_serving
