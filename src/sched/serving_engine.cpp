#include "sched/serving_engine.h"

#include <fmt/format.h>

#include <algorithm>
#include <random>

#include "core/error.h"

namespace mlaserve::sched {

namespace {

// A grammar's mask would have to be known at every draft position before the drafts exist, so
// constrained requests don't speculate. Penalties do: every rank of the group keeps the token
// counts a verify step's rows need (Worker::accept_drafts). Logprobs come from the verify
// step's row of each token, as they would from its decode step.
bool speculates(const GenerationRequest& r) {
  return !r.constraint;
}

// Prompt tokens a step may always run per DP group, whatever the step-time target says, so
// prefill moves on even when decoding alone takes the whole target.
constexpr int64_t kMinPrefillTokensPerGroup = 128;

// A plan's rows: prompt tokens, and decodes.
struct StepRows {
  int64_t prefill = 0, decode = 0;
  int64_t partial_prefills = 0;  // prompt chunks that stop short of the prompt's end
};

// `groups` planned `plan`, and know which of its tokens are decodes.
StepRows count_rows(const runtime::StepPlan& plan, const std::vector<GroupScheduler>& groups) {
  StepRows rows;
  for (size_t g = 0; g < plan.groups.size(); ++g) {
    rows.decode += groups[g].planned_decode_tokens();
    for (const runtime::PlannedSequence& s : plan.groups[g].seqs) {
      rows.prefill += static_cast<int64_t>(s.new_tokens.size());
      if (!s.sample) rows.partial_prefills += 1;  // only a prompt's last chunk samples
    }
  }
  rows.prefill -= rows.decode;
  return rows;
}

}  // namespace

ServingEngine::ServingEngine(int groups, const EngineOptions& options)
    : options_(options),
      balancer_(options.load_balance),
      step_budget_(options.max_step_time_ms, options.prefill_tokens_per_step,
                   kMinPrefillTokensPerGroup * groups) {
  for (int g = 0; g < groups; ++g)
    groups_.emplace_back(options.kv_tokens_per_group, options.limits);
  publish_status();
}

namespace {
TokenEvent error_event(const std::string& error, int64_t prompt_tokens) {
  TokenEvent e;
  e.finish = FinishReason::Error;
  e.error = error;
  e.prompt_tokens = prompt_tokens;
  return e;
}
}  // namespace

uint64_t ServingEngine::submit(GenerationRequest request, EventSink sink) {
  auto r = std::make_shared<ActiveRequest>();
  r->request = std::move(request);
  r->sink = std::move(sink);
  std::string failed;
  {
    std::lock_guard lock(inbox_mutex_);
    r->id = next_id_++;
    if (failed_.empty()) inbox_.push_back(r);
    failed = failed_;
  }
  if (!failed.empty()) {
    r->sink(error_event(failed, r->prompt_len()));
    return r->id;
  }
  inbox_cv_.notify_one();
  return r->id;
}

void ServingEngine::fail_all(const std::string& error) {
  std::scoped_lock lock(loop_mutex_, inbox_mutex_);
  failed_ = error;
  for (auto& r : inbox_) active_[r->id] = r;
  inbox_.clear();
  for (auto& [id, r] : active_) {
    if (r->sink) r->sink(error_event(error, r->prompt_len()));
    r->sink = nullptr;
  }
  stop_ = true;
}

void ServingEngine::abort(uint64_t id) {
  {
    std::lock_guard lock(inbox_mutex_);
    aborts_.push_back(id);
  }
  inbox_cv_.notify_one();
}

// The caches belong to the step loop's thread: the call waits for the loop to do it.
bool ServingEngine::flush_cache() {
  std::future<bool> done;
  {
    std::lock_guard lock(inbox_mutex_);
    done = flushes_.emplace_back().get_future();
  }
  inbox_cv_.notify_one();
  if (done.wait_for(std::chrono::seconds(30)) != std::future_status::ready) return false;
  try {
    return done.get();
  } catch (const std::future_error&) {
    return false;  // the engine stopped first
  }
}

bool ServingEngine::flush_all_groups() {
  const bool idle = std::all_of(groups_.begin(), groups_.end(), [](const GroupScheduler& g) {
    return g.running().empty() && g.waiting() == 0;
  });
  if (!idle) return false;
  for (GroupScheduler& g : groups_) g.flush_cache();
  return true;
}

void ServingEngine::stop() {
  stop_ = true;
}  // async-signal-safe; run() notices within 100 ms

void ServingEngine::finish(ActiveRequest& r, FinishReason reason, const std::string& error) {
  TokenEvent e;
  e.finish = reason;
  e.error = error;
  e.prompt_tokens = r.prompt_len();
  if (r.sink) r.sink(e);
  groups_[static_cast<size_t>(r.group)].remove(r.id);
  released_.push_back(r.id);
  active_.erase(r.id);
  requests_finished_ += 1;
}

// New requests go to a group by the load balancer; requests that can never run are refused.
void ServingEngine::take_inbox() {
  std::deque<std::shared_ptr<ActiveRequest>> incoming;
  std::vector<uint64_t> aborts;
  std::vector<std::promise<bool>> flushes;
  {
    std::lock_guard lock(inbox_mutex_);
    incoming.swap(inbox_);
    aborts.swap(aborts_);
    flushes.swap(flushes_);
  }
  // A flush is answered once the status shows it (a client reading /get_server_info next sees
  // the empty cache).
  if (!flushes.empty()) {
    const bool flushed = flush_all_groups();
    publish_status();
    for (std::promise<bool>& flush : flushes) flush.set_value(flushed);
  }
  for (auto& r : incoming) {
    active_[r->id] = r;
    if (r->request.prompt.empty() ||
        r->prompt_len() + r->request.max_new_tokens > options_.context_length) {
      finish(
          *r, FinishReason::Rejected,
          fmt::format("prompt of {} tokens plus max_new_tokens {} exceeds the context of {} tokens",
                      r->prompt_len(), r->request.max_new_tokens, options_.context_length));
      continue;
    }
    if (r->request.priority != 0 && !options_.limits.priority) {
      finish(*r, FinishReason::Rejected,
             "'priority' needs a server started with --enable-priority-scheduling");
      continue;
    }
    if (r->request.constraint && r->request.constraint->must_end()) {
      finish(*r, FinishReason::Stop);  // a grammar that matches only the empty output
      continue;
    }
    if (options_.spec_steps > 0 && speculates(r->request) &&
        r->prompt_len() + r->request.max_new_tokens + 2 * options_.spec_steps <=
            options_.context_length) {
      r->spec_steps = options_.spec_steps;
      // Every rank of the group draws the same verify choices from the seed (counter_uniform).
      if (!r->request.sampling.greedy() && !r->request.sampling.seed)
        r->request.sampling.seed = std::random_device{}();
    }
    std::vector<LoadBalancer::GroupLoad> load;
    for (auto& g : groups_) {
      load.push_back({g.outstanding_tokens(),
                      balancer_.needs_cached_prefix() ? g.cached_prefix_length(*r) : 0});
    }
    r->group = balancer_.choose(load, r->prompt_len());
    if (!groups_[static_cast<size_t>(r->group)].fits_ever(*r)) {
      finish(
          *r, FinishReason::Rejected,
          fmt::format(
              "prompt of {} tokens plus max_new_tokens {} needs more KV cache than the {} tokens a "
              "group holds",
              r->prompt_len(), r->request.max_new_tokens, options_.kv_tokens_per_group));
      continue;
    }
    prompt_tokens_ += static_cast<uint64_t>(r->prompt_len());
    groups_[static_cast<size_t>(r->group)].enqueue(r);
  }
  for (uint64_t id : aborts) {
    if (auto it = active_.find(id); it != active_.end()) finish(*it->second, FinishReason::Abort);
  }
}

void ServingEngine::apply(const std::vector<runtime::SequenceResult>& results) {
  for (const runtime::SequenceResult& res : results) {
    auto it = active_.find(res.id);
    if (it == active_.end()) continue;
    ActiveRequest& r = *it->second;
    if (res.tokens.empty()) {
      if (res.token >= 0) emit(r, res, res.token, 0);
      continue;
    }
    // A speculative step: the drafts it kept, then the model's own token.
    if (!r.drafts.empty()) {
      r.spec_verify_ct += 1;
      spec_verify_steps_ += 1;
      spec_accepted_drafts_ += res.tokens.size() - 1;
    }
    r.drafts = res.drafts;
    for (size_t k = 0; k < res.tokens.size(); ++k) {
      if (!emit(r, res, res.tokens[k], k)) break;
    }
  }
}

bool ServingEngine::emit(ActiveRequest& r, const runtime::SequenceResult& res, int32_t token,
                         size_t k) {
  r.generated.push_back(token);
  tokens_generated_ += 1;
  TokenConstraint* constraint = r.request.constraint.get();
  if (constraint) {
    try {
      constraint->accept(token);
    } catch (const Error& error) {
      finish(r, FinishReason::Error, std::string("structured output: ") + error.what());
      return false;
    }
  }
  TokenEvent e;
  e.token = token;
  if (k < res.logprobs.size()) {
    e.logprob = res.logprobs[k];
    const size_t per_token = res.top.size() / res.logprobs.size();
    e.top.assign(res.top.begin() + static_cast<std::ptrdiff_t>(k * per_token),
                 res.top.begin() + static_cast<std::ptrdiff_t>((k + 1) * per_token));
  }
  if (r.generated.size() == 1) {
    e.prompt_tokens = r.prompt_len();
    e.cached_tokens = r.cached_tokens;
    e.queue_seconds = std::chrono::duration<double>(r.admitted - r.arrival).count();
  }
  const auto& stops = r.request.stop_token_ids;
  const auto& eos = options_.eos_token_ids;
  const bool stop =
      std::find(stops.begin(), stops.end(), token) != stops.end() ||
      (!r.request.ignore_eos && std::find(eos.begin(), eos.end(), token) != eos.end());
  const bool length = static_cast<int64_t>(r.generated.size()) >= r.request.max_new_tokens;
  e.finish = stop ? FinishReason::Stop : length ? FinishReason::Length : FinishReason::None;
  e.spec_verify_ct = r.spec_verify_ct;
  if (r.sink) r.sink(e);
  if (e.finish == FinishReason::None) {
    if (!constraint || !constraint->must_end()) return true;
    // The grammar is complete: the request stops after this token, which is text, not a stop
    // token (so the stop comes as its own event).
    finish(r, FinishReason::Stop);
    return false;
  }
  r.sink = nullptr;  // the finishing event was the last one
  finish(r, e.finish);
  return false;
}

// Structured output: every sampling step of a constrained request carries the tokens its grammar
// allows, plus the end-of-sequence ids when the output is complete.
void ServingEngine::add_token_masks(runtime::StepPlan& plan) {
  const auto started = std::chrono::steady_clock::now();
  const size_t words = static_cast<size_t>((options_.vocab_size + 63) / 64);
  bool any = false;
  std::vector<std::pair<uint64_t, std::string>> failed;
  // A constraint that fails takes its sequence out of the step; the request ends with the error.
  const auto masked_or_failed = [&](runtime::PlannedSequence& s) {
    const ActiveRequest& r = *active_.at(s.id);
    TokenConstraint* constraint = r.request.constraint.get();
    if (!s.sample || !constraint) return false;
    any = true;
    s.allowed_tokens.assign(words, 0);
    try {
      constraint->fill_allowed(s.allowed_tokens);
    } catch (const Error& error) {
      failed.emplace_back(s.id, error.what());
      return true;
    }
    // A byte-level vocabulary spells every next byte, so a grammar that may go on always
    // allows a token; were none allowed, ending is the only way out.
    const bool none = std::all_of(s.allowed_tokens.begin(), s.allowed_tokens.end(),
                                  [](uint64_t word) { return word == 0; });
    if (constraint->can_end() || none) allow_end_tokens(r.request, s.allowed_tokens);
    return false;
  };
  for (runtime::GroupPlan& group : plan.groups) std::erase_if(group.seqs, masked_or_failed);
  for (const auto& [id, error] : failed) {
    finish(*active_.at(id), FinishReason::Error, "structured output: " + error);
  }
  if (any) {
    mask_seconds_ +=
        std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  }
}

void ServingEngine::allow_end_tokens(const GenerationRequest& request,
                                     std::vector<uint64_t>& allowed) const {
  const auto allow = [&](int64_t id) {
    if (id >= 0 && id < options_.vocab_size) allowed[id / 64] |= uint64_t{1} << (id % 64);
  };
  for (int32_t id : request.stop_token_ids) allow(id);
  if (!request.ignore_eos) {
    for (int64_t id : options_.eos_token_ids) allow(id);
  }
}

bool ServingEngine::step_once(runtime::Worker& worker) {
  const auto started = std::chrono::steady_clock::now();
  std::unique_lock loop(loop_mutex_);
  take_inbox();
  runtime::StepPlan plan;
  bool any = false;
  const int64_t group_budget =
      std::max<int64_t>(1, step_budget_.prefill_tokens() / static_cast<int64_t>(groups_.size()));
  for (auto& g : groups_) {
    plan.groups.push_back(g.plan_step(group_budget));
    any = any || !plan.groups.back().seqs.empty();
  }
  if (!any) {
    publish_status();
    return false;
  }
  add_token_masks(plan);
  take_snapshot_ops(plan);
  plan.released.swap(released_);
  // Planning admitted what --max-running-requests allows; the step runs them all.
  running_peak_ = std::max(running_peak_, running_requests());
  const auto planned = std::chrono::steady_clock::now();
  loop.unlock();
  std::vector<runtime::SequenceResult> results = worker.step(&plan);
  loop.lock();
  last_step_ = std::chrono::steady_clock::now();
  const StepRows rows = count_rows(plan, groups_);
  if (rows.prefill > 0 && rows.decode > 0) mixed_steps_ += 1;
  prefill_chunks_ += static_cast<uint64_t>(rows.partial_prefills);
  step_budget_.record(rows.prefill, std::chrono::duration<double, std::milli>(
                                        std::chrono::steady_clock::now() - planned)
                                        .count());
  apply(results);
  // Scheduling time against the whole step tells whether planning step i+1 during step i pays.
  schedule_seconds_ += std::chrono::duration<double>(planned - started).count();
  step_seconds_ +=
      std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  steps_ += 1;
  publish_status();
  return true;
}

// The groups' snapshot changes ride on the next plan sent (they only need to precede the next
// forward that could read them).
void ServingEngine::take_snapshot_ops(runtime::StepPlan& plan) {
  for (size_t g = 0; g < groups_.size(); ++g)
    plan.groups[g].snapshot_ops = groups_[g].take_snapshot_ops();
}

// An empty plan: every rank runs no forward and gathers no result, but the followers' wait for
// a plan ends.
void ServingEngine::send_keepalive(runtime::Worker& worker) {
  runtime::StepPlan keepalive;
  keepalive.groups.resize(groups_.size());
  {
    const std::lock_guard loop(loop_mutex_);
    take_snapshot_ops(keepalive);
  }
  worker.step(&keepalive);
  last_step_ = std::chrono::steady_clock::now();
}

void ServingEngine::run(runtime::Worker& worker) {
  while (!stop_) {
    if (step_once(worker)) continue;
    if (options_.keepalive_seconds > 0 &&
        std::chrono::steady_clock::now() - last_step_ >
            std::chrono::duration<double>(options_.keepalive_seconds)) {
      send_keepalive(worker);
    }
    std::unique_lock lock(inbox_mutex_);
    inbox_cv_.wait_for(lock, std::chrono::milliseconds(100), [&] {
      return stop_ || !inbox_.empty() || !aborts_.empty() || !flushes_.empty();
    });
  }
  runtime::StepPlan shutdown;
  shutdown.shutdown = true;
  worker.step(&shutdown);
}

int64_t ServingEngine::running_requests() const {
  int64_t running = 0;
  for (const GroupScheduler& g : groups_) running += static_cast<int64_t>(g.running().size());
  return running;
}

void ServingEngine::publish_status() {
  nlohmann::json groups = nlohmann::json::array();
  int64_t running = 0, waiting = 0, kv_used = 0, kv_total = 0, retractions = 0, preemptions = 0;
  for (size_t g = 0; g < groups_.size(); ++g) {
    const GroupScheduler& s = groups_[g];
    groups.push_back({{"dp_rank", g},
                      {"running_requests", s.running().size()},
                      {"waiting_requests", s.waiting()},
                      {"outstanding_tokens", s.outstanding_tokens()},
                      {"kv_used_tokens", s.kv_used()},
                      {"radix_cached_tokens", s.cached_tokens()},
                      {"prefix_snapshots", s.snapshots()},
                      {"retractions", s.retractions()},
                      {"kv_capacity_tokens", s.kv_capacity()}});
    running += static_cast<int64_t>(s.running().size());
    waiting += static_cast<int64_t>(s.waiting());
    kv_used += s.kv_used();
    kv_total += s.kv_capacity();
    retractions += s.retractions();
    preemptions += s.preemptions();
  }
  nlohmann::json status = {
      {"layout", options_.layout},
      {"load", groups},
      {"running_requests", running},
      {"waiting_requests", waiting},
      {"kv_used_tokens", kv_used},
      {"max_total_num_tokens", kv_total},
      {"kv_usage",
       kv_total > 0 ? static_cast<double>(kv_used) / static_cast<double>(kv_total) : 0.0},
      {"requests_finished", requests_finished_},
      {"retractions_total", retractions},
      {"preemptions", preemptions},
      {"prompt_tokens_total", prompt_tokens_},
      {"generation_tokens_total", tokens_generated_},
      {"steps", steps_},
      {"mixed_steps", mixed_steps_},
      {"partial_prefill_chunks", prefill_chunks_},
      {"running_requests_peak", running_peak_},
      {"schedule_seconds_total", schedule_seconds_},
      {"grammar_mask_seconds_total", mask_seconds_},
      {"step_seconds_total", step_seconds_},
      {"context_length", options_.context_length},
      {"chunked_prefill_size_per_group", options_.limits.chunk_tokens},
      {"max_running_requests_per_group", options_.limits.max_running},
      {"max_prefill_tokens_per_group", options_.limits.max_prefill_tokens},
      {"radix_cache", options_.limits.radix_cache},
      {"mixed_chunk", options_.limits.mixed_steps},
      {"speculative_num_steps", options_.spec_steps},
      {"spec_verify_steps_total", spec_verify_steps_},
      {"spec_accepted_drafts_total", spec_accepted_drafts_},
      {"max_step_time_ms", options_.max_step_time_ms},
      {"step_prefill_budget", step_budget_.prefill_tokens()},
      {"step_base_ms", step_budget_.base_ms()},
      {"step_ms_per_prefill_token", step_budget_.token_ms()},
      {"schedule_policy", options_.limits.policy == SchedulePolicy::Fcfs ? "fcfs" : "lpm"}};
  std::lock_guard lock(status_mutex_);
  status_ = std::move(status);
}

nlohmann::json ServingEngine::status() const {
  std::lock_guard lock(status_mutex_);
  return status_;
}

}  // namespace mlaserve::sched
