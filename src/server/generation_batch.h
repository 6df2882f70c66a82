// The engine requests behind one HTTP request (n choices, several prompts): submits them, folds
// their events into ChoiceStates on the handler's thread, records metrics, and on destruction
// aborts whatever is still running, so a handler that returns early (client gone, error) frees
// the engine's KV cache.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "sched/generation.h"
#include "server/choice_state.h"
#include "server/client_connection.h"
#include "server/event_queue.h"
#include "server/server_context.h"

namespace mlaserve::server {

// One engine request to make: the prompt, token budget and sampling are already resolved.
struct ChoicePlan {
  sched::GenerationRequest request;
  size_t prompt_index;
  std::string rid;  // the API id /abort_request knows it by (shared by a request's choices)
  std::vector<std::string> stop;
  bool skip_special_tokens = true;
};

enum class WaitResult { Done, ClientGone, ServerStopping };

// Where a choice's time went, in seconds: waiting for the engine to start its prefill, the
// prefill (to the first token), the decode (first token to the end); nullopt for a phase not
// reached yet. decode_tokens_per_second counts the tokens after the first.
struct ChoiceTimings {
  double queue = 0;
  std::optional<double> prefill, decode, decode_tokens_per_second;
  double e2e = 0;  // arrival to the end (or to now, for a choice still running)
  // {"queue_ms", "prefill_ms", "decode_ms", "e2e_ms", "decode_tokens_per_second"} (nulls for
  // phases not reached).
  nlohmann::json json_ms() const;
};

class GenerationBatch {
 public:
  using Clock = std::chrono::steady_clock;

  // `arrived`: when the HTTP request came in (time-to-first-token is measured from it).
  GenerationBatch(ServerContext& context, Clock::time_point arrived);
  ~GenerationBatch();
  GenerationBatch(const GenerationBatch&) = delete;
  GenerationBatch& operator=(const GenerationBatch&) = delete;

  // Submits one engine request per plan (400 if a rid is already in flight).
  void submit(std::vector<ChoicePlan> plans);

  // Waits up to `timeout` for engine events and applies those that came.
  void wait_and_apply(std::chrono::milliseconds timeout);
  // Applies events until `done()` holds, the client disconnects or the server stops.
  template <typename Predicate>
  WaitResult wait_until(Predicate done, const ClientConnection& client);

  // Stops every choice still running (in the engine too).
  void abort_unfinished(const std::string& message);

  // Every choice has heard from the engine (or has ended): a stream may start.
  bool all_started() const;
  bool all_finished() const;
  // The first choice that ended with an engine error, if any.
  const ChoiceState* first_error() const;

  std::vector<ChoiceState>& choices() { return choices_; }
  const std::vector<ChoiceState>& choices() const { return choices_; }
  Clock::time_point arrived() const { return arrived_; }
  ChoiceTimings timings(size_t choice) const;

 private:
  static constexpr std::chrono::milliseconds kPollInterval{50};

  void apply(const QueuedEvent& queued);
  void release_rids();
  void record_token_timing(size_t choice, Clock::time_point at);

  ServerContext& context_;
  Clock::time_point arrived_;
  std::shared_ptr<EventQueue> queue_ = std::make_shared<EventQueue>();
  std::vector<ChoiceState> choices_;
  std::vector<uint64_t> engine_ids_;
  std::vector<Clock::time_point> last_token_at_;
  std::vector<std::optional<Clock::time_point>> first_token_at_, finished_at_;
  std::vector<std::string> rids_;
};

template <typename Predicate>
WaitResult GenerationBatch::wait_until(Predicate done, const ClientConnection& client) {
  while (!done()) {
    if (context_.stopping) return WaitResult::ServerStopping;
    if (client.closed()) return WaitResult::ClientGone;
    wait_and_apply(kPollInterval);
  }
  return WaitResult::Done;
}

}  // namespace mlaserve::server
