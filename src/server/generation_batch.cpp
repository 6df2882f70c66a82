#include "server/generation_batch.h"

#include <algorithm>
#include <utility>

#include "server/api_error.h"

namespace mlaserve::server {

namespace {

double seconds_between(GenerationBatch::Clock::time_point from,
                       GenerationBatch::Clock::time_point to) {
  return std::chrono::duration<double>(to - from).count();
}

}  // namespace

GenerationBatch::GenerationBatch(ServerContext& context, Clock::time_point arrived)
    : context_(context), arrived_(arrived) {}

GenerationBatch::~GenerationBatch() {
  abort_unfinished("the request ended");
  release_rids();
}

// Frees the request ids as soon as every choice has finished, before the client can see the
// last event, so a later /abort_request for the same id answers 404 rather than racing the
// handler's teardown.
void GenerationBatch::release_rids() {
  for (const std::string& rid : rids_) context_.registry.remove(rid);
  rids_.clear();
}

void GenerationBatch::submit(std::vector<ChoicePlan> plans) {
  for (const ChoicePlan& plan : plans) {
    if (std::find(rids_.begin(), rids_.end(), plan.rid) != rids_.end()) continue;
    if (!context_.registry.reserve(plan.rid, queue_)) {
      throw invalid_request("Request id '" + plan.rid + "' is already in use", "rid");
    }
    rids_.push_back(plan.rid);
  }
  choices_.reserve(plans.size());
  for (ChoicePlan& plan : plans) {
    const bool keep_logprobs = plan.request.logprobs || plan.request.top_logprobs > 0;
    choices_.emplace_back(
        plan.prompt_index, static_cast<int64_t>(plan.request.prompt.size()),
        plan.request.max_new_tokens,
        TextStream(context_.tokenizer, plan.skip_special_tokens, std::move(plan.stop)),
        keep_logprobs);
    last_token_at_.push_back(arrived_);
    first_token_at_.emplace_back();
    finished_at_.emplace_back();
  }
  for (size_t i = 0; i < plans.size(); ++i) {
    context_.metrics.add_prompt_tokens(static_cast<int64_t>(plans[i].request.prompt.size()));
    auto sink = [queue = queue_, i](const sched::TokenEvent& event) {
      queue->push({i, event, Clock::now()});
    };
    engine_ids_.push_back(context_.engine.submit(std::move(plans[i].request), std::move(sink)));
    context_.registry.attach(plans[i].rid, i, engine_ids_.back());
  }
}

void GenerationBatch::wait_and_apply(std::chrono::milliseconds timeout) {
  for (const QueuedEvent& queued : queue_->wait_take_all(timeout)) apply(queued);
}

void GenerationBatch::apply(const QueuedEvent& queued) {
  ChoiceState& choice = choices_[queued.choice];
  if (choice.finished()) return;  // e.g. tokens still in flight after a stop string
  if (queued.event.token >= 0) {
    record_token_timing(queued.choice, queued.arrived);
    context_.metrics.add_generation_tokens(1);
  }
  if (choice.apply(queued.event)) context_.engine.abort(engine_ids_[queued.choice]);
  if (choice.finished()) {
    finished_at_[queued.choice] = queued.arrived;
    context_.metrics.count_finished(finish_kind_name(choice.finish()->kind));
    context_.metrics.observe_request_latency(seconds_between(arrived_, queued.arrived));
  }
  if (all_finished()) release_rids();
}

void GenerationBatch::record_token_timing(size_t choice, Clock::time_point at) {
  if (choices_[choice].completion_tokens() == 0) {
    first_token_at_[choice] = at;
    context_.metrics.observe_time_to_first_token(seconds_between(arrived_, at));
  } else {
    context_.metrics.observe_inter_token_latency(seconds_between(last_token_at_[choice], at));
  }
  last_token_at_[choice] = at;
}

void GenerationBatch::abort_unfinished(const std::string& message) {
  for (size_t i = 0; i < engine_ids_.size(); ++i) {
    if (choices_[i].finished()) continue;
    context_.engine.abort(engine_ids_[i]);
    choices_[i].finish_aborted(message);
    context_.metrics.count_finished(finish_kind_name(FinishKind::Abort));
  }
  release_rids();
}

nlohmann::json ChoiceTimings::json_ms() const {
  const auto ms = [](std::optional<double> seconds) {
    return seconds ? nlohmann::json(*seconds * 1e3) : nlohmann::json(nullptr);
  };
  return {{"queue_ms", queue * 1e3},
          {"prefill_ms", ms(prefill)},
          {"decode_ms", ms(decode)},
          {"e2e_ms", e2e * 1e3},
          {"decode_tokens_per_second", decode_tokens_per_second
                                           ? nlohmann::json(*decode_tokens_per_second)
                                           : nlohmann::json(nullptr)}};
}

ChoiceTimings GenerationBatch::timings(size_t index) const {
  const ChoiceState& choice = choices_[index];
  const std::optional<Clock::time_point>& first = first_token_at_[index];
  const std::optional<Clock::time_point>& end = finished_at_[index];
  ChoiceTimings timings;
  timings.queue = choice.queue_seconds();
  timings.e2e = seconds_between(arrived_, end.value_or(Clock::now()));
  if (!first) return timings;
  // The time to the first token less the engine's queue: the prefill, with the hand-offs
  // between the HTTP thread and the engine (well under a millisecond).
  timings.prefill = std::max(0.0, seconds_between(arrived_, *first) - timings.queue);
  if (!end) return timings;
  timings.decode = seconds_between(*first, *end);
  if (choice.completion_tokens() > 1 && *timings.decode > 0) {
    timings.decode_tokens_per_second =
        static_cast<double>(choice.completion_tokens() - 1) / *timings.decode;
  }
  return timings;
}

bool GenerationBatch::all_started() const {
  return std::all_of(choices_.begin(), choices_.end(), [](const ChoiceState& choice) {
    return choice.started() || choice.finished();
  });
}

bool GenerationBatch::all_finished() const {
  return std::all_of(choices_.begin(), choices_.end(),
                     [](const ChoiceState& choice) { return choice.finished(); });
}

const ChoiceState* GenerationBatch::first_error() const {
  for (const ChoiceState& choice : choices_) {
    if (choice.finish() && choice.finish()->kind == FinishKind::Error) return &choice;
  }
  return nullptr;
}

}  // namespace mlaserve::server
