#include "sched/group_scheduler.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "core/error.h"

namespace mlaserve::sched {

namespace {

// SGLang's defaults: admission first assumes 70% of each remaining generation budget will be
// used, relaxing to 10% over ~600 decode steps without trouble; a retraction resets it to 100%.
constexpr double kInitialNewTokenRatio = 0.7;
constexpr double kMinNewTokenRatio = 0.1;
constexpr double kNewTokenRatioDecay = (kInitialNewTokenRatio - kMinNewTokenRatio) / 600;

// How many leading fill tokens a and b share, up to limit.
int64_t shared_prefix(const ActiveRequest& a, const ActiveRequest& b, int64_t limit) {
  int64_t k = 0;
  while (k < limit && a.fill_token(k) == b.fill_token(k)) ++k;
  return k;
}

// Puts r back to the start of a prefill of everything it has (prompt and generated tokens).
void reset_prefill(ActiveRequest& r) {
  r.n_prefilled = 0;
  r.prefill_len = r.fill_len();
}

}  // namespace

SchedulePolicy parse_schedule_policy(const std::string& name) {
  if (name == "fcfs") return SchedulePolicy::Fcfs;
  if (name == "lpm") return SchedulePolicy::LongestPrefixMatch;
  fail("unknown schedule policy '{}' (expected fcfs or lpm)", name);
}

GroupScheduler::GroupScheduler(int64_t kv_capacity_tokens, const GroupLimits& limits)
    : limits_(limits), slots_(kv_capacity_tokens), new_token_ratio_(kInitialNewTokenRatio) {}

void GroupScheduler::enqueue(std::shared_ptr<ActiveRequest> request) {
  reset_prefill(*request);
  waiting_.push_back(std::move(request));
}

bool GroupScheduler::remove(uint64_t id) {
  auto match = [id](const auto& r) { return r->id == id; };
  if (auto it = std::find_if(waiting_.begin(), waiting_.end(), match); it != waiting_.end()) {
    waiting_.erase(it);
    return true;
  }
  if (auto it = std::find_if(running_.begin(), running_.end(), match); it != running_.end()) {
    release_kv(**it);
    running_.erase(it);
    return true;
  }
  return false;
}

bool GroupScheduler::flush_cache() {
  if (!running_.empty() || !waiting_.empty()) return false;
  free_slots(cache_.reset());
  return true;
}

int64_t GroupScheduler::outstanding_tokens() const {
  int64_t n = 0;
  for (const auto& r : waiting_) n += r->outstanding_tokens();
  for (const auto& r : running_) n += r->outstanding_tokens();
  return n;
}

// The longest cached prefix of a request that is not admitted (its prefill is all it has); never
// the whole sequence, so at least one token runs for the logits.
cache::RadixCache::Match GroupScheduler::match_cached_prefix(const ActiveRequest& r) {
  if (!limits_.radix_cache || r.fill_len() < 1) return {};
  return cache_.match_prefix(r.fill_tokens(0, r.fill_len() - 1), r.request.cache_salt);
}

int64_t GroupScheduler::reusable_length(const cache::RadixCache::Match& match) const {
  auto k = static_cast<int64_t>(match.slots.size());
  if (!snapshots_on()) return k;
  for (; k > 0; --k) {
    const auto it = snapshots_.find(match.slots[static_cast<size_t>(k - 1)]);
    if (it != snapshots_.end() && it->second.n_tokens == k && it->second.made < plans_) break;
  }
  return k;
}

int64_t GroupScheduler::cached_prefix_length(const ActiveRequest& r) {
  return reusable_length(match_cached_prefix(r));
}

// A request prefilling in the plan being built computes a longer prefix that r shares (a burst
// arriving together): r waits a step for it to enter the radix cache (publish_prefix, at the next
// plan) rather than computing it too. Shares under 64 tokens more than r's match are not worth
// the step.
bool GroupScheduler::shares_a_prefill_in_flight(const ActiveRequest& r, int64_t n_match) const {
  constexpr int64_t kMinGain = 64;
  for (const auto& running : running_) {
    if (running->chunk_planned != plans_ || running->request.cache_salt != r.request.cache_salt)
      continue;
    const int64_t limit = std::min(running->n_prefilled, r.prefill_len - 1);
    if (shared_prefix(*running, r, limit) >= n_match + kMinGain) return true;
  }
  return false;
}

// A running request's prefill is about to snapshot a longer part of this match than the
// longest snapshot there is (a burst of requests sharing a new prefix): waiting for it costs a
// step or a few, computing the prefix again costs its whole prefill.
bool GroupScheduler::awaits_snapshot(const cache::RadixCache::Match& match, int64_t n_match) const {
  if (!snapshots_on()) return false;
  std::vector<int32_t> pending;  // keys of snapshots made by this plan or by a prefill to come
  for (const auto& running : running_)
    if (running->snapshot_at > 0 && running->snapshot_key >= 0)
      pending.push_back(running->snapshot_key);
  for (const auto& [key, snapshot] : snapshots_)
    if (snapshot.made == plans_) pending.push_back(key);
  if (pending.empty()) return false;
  return std::any_of(match.slots.begin() + n_match, match.slots.end(), [&](int32_t slot) {
    return std::find(pending.begin(), pending.end(), slot) != pending.end();
  });
}

bool GroupScheduler::add_snapshot(int32_t key, int64_t n_tokens, bool shared) {
  if (n_tokens < limits_.min_snapshot_tokens) return false;
  if (!snapshots_.contains(key) &&
      static_cast<int64_t>(snapshots_.size()) >= limits_.max_snapshots) {
    // One no other request has shared goes first (a request's own prompt-end or final state,
    // most of which nobody asks for again), then the least recently used; never one this plan
    // uses (a restore, or made now). So a shared system prompt's snapshot outlives the
    // requests' own.
    auto victim = snapshots_.end();
    for (auto it = snapshots_.begin(); it != snapshots_.end(); ++it) {
      const Snapshot& s = it->second;
      if (s.used == plans_) continue;
      if (victim == snapshots_.end() ||
          std::pair(s.shared, s.used) < std::pair(victim->second.shared, victim->second.used))
        victim = it;
    }
    if (victim == snapshots_.end()) return false;
    snapshot_ops_.push_back({.key = victim->first});
    snapshots_.erase(victim);
  }
  snapshots_[key] = {n_tokens, plans_, plans_, shared};
  return true;
}

void GroupScheduler::free_slots(std::span<const int32_t> slots) {
  if (!snapshots_.empty()) {
    for (int32_t slot : slots)
      if (snapshots_.erase(slot) > 0) snapshot_ops_.push_back({.key = slot});
  }
  slots_.release(slots);
}

// Slots r is expected to need for the rest of its generation (the epsilon keeps 0.7 * 10 at 7).
int64_t GroupScheduler::expected_new_tokens(const ActiveRequest& r) const {
  return static_cast<int64_t>(
      std::ceil(new_token_ratio_ * static_cast<double>(r.remaining_new_tokens()) - 1e-9));
}

int64_t GroupScheduler::decode_reservation() const {
  int64_t n = 0;
  for (const auto& r : running_) n += expected_new_tokens(*r);
  return n;
}

// n free slots, evicting cached prefixes nobody uses when the free list runs short.
std::vector<int32_t> GroupScheduler::allocate(int64_t n) {
  if (n > slots_.free_slots()) free_slots(cache_.evict(n - slots_.free_slots()));
  return slots_.allocate(n);
}

// With priorities, higher-priority requests first; then, under lpm, longer cached prefixes
// first; ties keep their order (arrival, or a retracted request's place at the front). lpm
// matches every waiting request each step; past 128 of them that costs more than it gains, so
// the order there stays fcfs (as SGLang does).
void GroupScheduler::order_waiting() {
  constexpr size_t kMaxLpmQueue = 128;
  const bool lpm = limits_.policy == SchedulePolicy::LongestPrefixMatch && limits_.radix_cache &&
                   waiting_.size() <= kMaxLpmQueue;
  if (!lpm && !limits_.priority) return;
  struct Keyed {
    int32_t priority;
    int64_t prefix;
    std::shared_ptr<ActiveRequest> request;
  };
  std::vector<Keyed> keyed;
  for (auto& r : waiting_)
    keyed.push_back(
        {limits_.priority ? r->request.priority : 0, lpm ? cached_prefix_length(*r) : 0, r});
  std::stable_sort(keyed.begin(), keyed.end(), [](const Keyed& a, const Keyed& b) {
    return a.priority != b.priority ? a.priority > b.priority : a.prefix > b.prefix;
  });
  for (size_t i = 0; i < keyed.size(); ++i) waiting_[i] = std::move(keyed[i].request);
}

// Reuses r's longest cached prefix (at least one token is left to run, for the logits) and
// allocates slots for the rest of its prefill, if that and the expected generation fit next to
// what the running requests are expected to need, and the tokens left to prefill fit
// prefill_budget.
bool GroupScheduler::try_admit(ActiveRequest& r, int64_t prefill_budget) {
  cache::RadixCache::Match match = match_cached_prefix(r);
  const int64_t n_match = reusable_length(match);
  if (snapshots_on() ? awaits_snapshot(match, n_match) : shares_a_prefill_in_flight(r, n_match))
    return false;
  const int64_t extend = r.prefill_len - n_match;
  if (match.last) cache_.lock(match.last);
  if (extend > prefill_budget ||
      extend + expected_new_tokens(r) + decode_reservation() > available()) {
    if (match.last) cache_.unlock(match.last);
    return false;
  }
  // Where the cached prefix goes further than its snapshot, the prefill will snapshot its end
  // under the cache's slot (which match.last's lock keeps while r runs); where r shares more
  // with a waiting request, it snapshots that under its own slot, published to the cache then.
  const auto n_cached = static_cast<int64_t>(match.slots.size());
  const int64_t shared = snapshots_on() ? prefix_shared_with_waiting(r) : 0;
  const int64_t at = std::max(n_cached, shared);
  const bool snapshot = at > n_match && at >= limits_.min_snapshot_tokens;
  r.snapshot_at = snapshot ? at : 0;
  r.snapshot_key = snapshot && at == n_cached ? match.slots.back() : -1;
  if (n_match > 0 && snapshots_on()) {
    Snapshot& restored = snapshots_[match.slots[static_cast<size_t>(n_match - 1)]];
    restored.used = plans_;
    restored.shared = true;
  }
  match.slots.resize(static_cast<size_t>(n_match));
  r.slots = std::move(match.slots);
  r.prefix_node = match.last;
  r.n_prefix_slots = n_match;
  r.n_prefilled = n_match;
  if (r.retractions == 0) {
    r.cached_tokens = n_match;
    r.admitted = std::chrono::steady_clock::now();
  }
  const std::vector<int32_t> fresh = allocate(extend);
  r.slots.insert(r.slots.end(), fresh.begin(), fresh.end());
  return true;
}

// Gives r's KV back: computed latents go to the radix cache (slots it already holds for the same
// tokens are freed as duplicates), slots never written are freed.
void GroupScheduler::release_kv(ActiveRequest& r) {
  trim_speculation(r);
  const std::span<const int32_t> slots(r.slots);
  const int64_t computed = r.n_computed();
  int64_t keep = 0;  // leading slots now owned by the cache
  if (limits_.radix_cache) {
    const int64_t cached =
        cache_.insert(r.fill_tokens(0, computed), slots.first(static_cast<size_t>(computed)),
                      r.request.cache_salt);
    // The request's state after its last computed token becomes that prefix's snapshot (no
    // copy), when the cache now holds that token in r's slot.
    const int32_t last = computed > 0 ? slots[static_cast<size_t>(computed - 1)] : -1;
    if (snapshots_on()) {
      const bool kept = computed > cached && add_snapshot(last, computed, false);
      snapshot_ops_.push_back(
          {r.id, computed, last, kept ? runtime::SnapshotOp::Keep : runtime::SnapshotOp::Forget});
    }
    free_slots(slots.subspan(static_cast<size_t>(r.n_prefix_slots),
                             static_cast<size_t>(cached - r.n_prefix_slots)));
    keep = computed;
    if (r.prefix_node) cache_.unlock(r.prefix_node);
  }
  free_slots(slots.subspan(static_cast<size_t>(keep)));
  r.slots.clear();
  r.prefix_node = nullptr;
  r.n_prefix_slots = 0;
}

// After a speculative step: frees its scratch slots and the slots of rejected drafts, so r holds
// one slot per computed token again (all but the last kept token, which runs next).
void GroupScheduler::trim_speculation(ActiveRequest& r) {
  free_slots(r.scratch_slots);
  r.scratch_slots.clear();
  if (r.spec_steps == 0 || !r.prefill_done()) return;
  const auto computed = static_cast<size_t>(r.fill_len() - 1);
  if (r.slots.size() <= computed) return;
  free_slots(std::span<const int32_t>(r.slots).subspan(computed));
  r.slots.resize(computed);
}

// Marks p to draft r's next tokens with the MTP module, with the scratch slots its chained
// drafts need after p's tokens.
void GroupScheduler::add_speculation(ActiveRequest& r, runtime::PlannedSequence& p) {
  p.spec_steps = r.spec_steps;
  r.scratch_slots = allocate(r.spec_steps - 1);
  p.kv_slots.insert(p.kv_slots.end(), r.scratch_slots.begin(), r.scratch_slots.end());
}

// The next chunk of r's prefill; the leader samples only after the last one.
runtime::PlannedSequence GroupScheduler::prefill_chunk(ActiveRequest& r, int64_t max_tokens) {
  runtime::PlannedSequence p;
  p.id = r.id;
  p.n_cached = r.n_prefilled;
  int64_t n = std::min(max_tokens, r.prefill_len - r.n_prefilled);
  if (r.snapshot_at > r.n_prefilled) n = std::min(n, r.snapshot_at - r.n_prefilled);
  p.new_tokens = r.fill_tokens(r.n_prefilled, r.n_prefilled + n);
  p.kv_slots.assign(r.slots.begin(), r.slots.begin() + r.n_prefilled + n);
  r.n_prefilled += n;
  r.chunk_planned = plans_;
  snapshot_prefill(r, p);
  p.sample = r.prefill_done();
  p.sampling = r.request.sampling;
  p.top_logprobs = r.request.logprobs ? r.request.top_logprobs : -1;
  if (r.spec_steps > 0) {
    r.drafts.clear();
    if (p.sample) {
      add_speculation(r, p);
    } else {  // the MTP module's latents of this chunk, each row with the token after it
      p.mtp_tokens = r.fill_tokens(p.n_cached + 1, p.n_cached + n + 1);
    }
  }
  return p;
}

// The longest prefix r's prefill shares with another waiting request's (of the same cache salt),
// short of either's last token; the first 128 waiting requests are looked at.
int64_t GroupScheduler::prefix_shared_with_waiting(const ActiveRequest& r) const {
  constexpr size_t kMaxLooked = 128;
  int64_t longest = 0;
  for (size_t i = 0; i < std::min(waiting_.size(), kMaxLooked); ++i) {
    const ActiveRequest& w = *waiting_[i];
    if (&w == &r || w.request.cache_salt != r.request.cache_salt) continue;
    longest = std::max(longest, shared_prefix(r, w, std::min(r.prefill_len, w.fill_len()) - 1));
  }
  return longest;
}

// The first n fill tokens of r enter the radix cache now, locked by r (SGLang's
// cache_unfinished_req), so that the requests admitted after it can find them: tokens the last
// step computed, or with snapshots tokens the step being planned completes (a match is then read
// from a snapshot made after the step, never from rows the step is still writing). Slots of r's
// the cache already held others for are duplicates: freed, r takes the cache's (the same tokens'
// rows).
void GroupScheduler::publish_prefix(ActiveRequest& r, int64_t n) {
  const std::vector<int32_t> tokens = r.fill_tokens(0, n);
  const int64_t cached =
      cache_.insert(tokens, std::span(r.slots).first(static_cast<size_t>(n)), r.request.cache_salt);
  const cache::RadixCache::Match held = cache_.match_prefix(tokens, r.request.cache_salt);
  for (auto k = static_cast<size_t>(r.n_prefix_slots); k < static_cast<size_t>(cached); ++k) {
    if (r.slots[k] == held.slots[k]) continue;
    free_slots(std::span(&r.slots[k], 1));
    r.slots[k] = held.slots[k];
  }
  cache_.lock(held.last);
  if (r.prefix_node) cache_.unlock(r.prefix_node);
  r.prefix_node = held.last;
  r.n_prefix_slots = n;
}

// With snapshots, a chunk ending at r's snapshot point or at its prefill's end leaves the
// sequence's state there as a snapshot: at a cached prefix's end, under the cache's slot; else
// under r's own, its prefix entering the cache now (publish_prefix). So a request repeating r's
// prompt, continuing it or sharing its start, even while r still runs, continues from there.
void GroupScheduler::snapshot_prefill(ActiveRequest& r, runtime::PlannedSequence& p) {
  const int64_t n = r.n_prefilled;
  const bool branch = n == r.snapshot_at;
  if (!snapshots_on() || (!branch && !r.prefill_done())) return;
  if (branch) r.snapshot_at = 0;
  if (n < limits_.min_snapshot_tokens) return;
  const bool own = !branch || r.snapshot_key < 0;
  if (own) publish_prefix(r, n);
  const int32_t key = own ? r.slots[static_cast<size_t>(n - 1)] : r.snapshot_key;
  if (add_snapshot(key, n, branch)) p.snapshot_key = key;
}

// Runs r's last sampled token, whose latent goes to a newly allocated slot; with speculation,
// followed by its drafts for the model to verify.
runtime::PlannedSequence GroupScheduler::decode(ActiveRequest& r) {
  runtime::PlannedSequence p;
  p.id = r.id;
  p.n_cached = r.fill_len() - 1;
  p.new_tokens = {r.generated.back()};
  p.new_tokens.insert(p.new_tokens.end(), r.drafts.begin(), r.drafts.end());
  const std::vector<int32_t> fresh = allocate(static_cast<int64_t>(p.new_tokens.size()));
  r.slots.insert(r.slots.end(), fresh.begin(), fresh.end());
  p.kv_slots = r.slots;
  p.sampling = r.request.sampling;
  p.top_logprobs = r.request.logprobs ? r.request.top_logprobs : -1;
  if (r.spec_steps > 0) {
    p.spec_verify = !r.drafts.empty();
    add_speculation(r, p);
  }
  return p;
}

// Waiting requests join while the chunk and prefill budgets, the running limit and the KV pool
// allow (the first prefill of a step may exceed max_prefill_tokens, as in SGLang).
void GroupScheduler::admit_waiting(runtime::GroupPlan& plan, int64_t& chunk_budget,
                                   bool prefill_started) {
  order_waiting();
  int64_t prefill_left = limits_.max_prefill_tokens;
  while (!waiting_.empty() && chunk_budget > 0 &&
         static_cast<int64_t>(running_.size()) < limits_.max_running) {
    std::shared_ptr<ActiveRequest> r = waiting_.front();
    if (!try_admit(*r, prefill_started ? prefill_left : std::numeric_limits<int64_t>::max())) break;
    prefill_started = true;
    waiting_.pop_front();
    running_.push_back(r);
    prefill_left -= r->prefill_len - r->n_prefilled;
    plan.seqs.push_back(prefill_chunk(*r, chunk_budget));
    chunk_budget -= static_cast<int64_t>(plan.seqs.back().new_tokens.size());
  }
}

// Takes running request `victim` back to the waiting queue's front: its computed KV goes to the
// radix cache, its generated tokens stay, and it is prefilled again (mostly from the cache) later.
void GroupScheduler::retract(std::vector<std::shared_ptr<ActiveRequest>>::iterator victim) {
  std::shared_ptr<ActiveRequest> r = *victim;
  running_.erase(victim);
  release_kv(*r);
  r->retractions += 1;
  reset_prefill(*r);
  waiting_.push_front(r);
  retractions_ += 1;
}

// Retracts running requests until each remaining one has a slot for this step: fewest generated
// tokens first, then the longest prompt (SGLang's order: the least work is lost).
void GroupScheduler::retract_until_decode_fits() {
  while (available() < decode_slots() && running_.size() > 1) {
    retract(std::min_element(running_.begin(), running_.end(), [](const auto& a, const auto& b) {
      if (a->n_generated() != b->n_generated()) return a->n_generated() < b->n_generated();
      return a->prompt_len() > b->prompt_len();
    }));
    new_token_ratio_ = 1.0;
  }
  if (available() < decode_slots()) {
    fail("KV pool of {} tokens cannot hold one decoding request", slots_.capacity());
  }
}

// Priority preemption: while the highest-priority waiting request cannot be admitted (the group
// runs its limit of requests, or the KV pool cannot take its prefill and expected generation), a
// running request of lower priority is retracted for it: the lowest priority first, then the
// fewest generated tokens. So a high-priority request waits at most about one step for room; the
// retracted one resumes (with the tokens it had) once no higher-priority request waits. Strict
// priority: under a steady stream of higher-priority work a low-priority request waits.
void GroupScheduler::preempt_for_priority() {
  if (waiting_.empty()) return;  // nothing to order or to preempt for
  order_waiting();
  while (!waiting_.empty()) {
    const ActiveRequest& top = *waiting_.front();
    const int64_t extend = top.prefill_len - cached_prefix_length(top);
    const bool no_room = static_cast<int64_t>(running_.size()) >= limits_.max_running ||
                         extend + expected_new_tokens(top) + decode_reservation() > available();
    if (!no_room) return;
    const auto victim =
        std::min_element(running_.begin(), running_.end(), [](const auto& a, const auto& b) {
          if (a->request.priority != b->request.priority)
            return a->request.priority < b->request.priority;
          return a->n_generated() < b->n_generated();
        });
    if (victim == running_.end() || (*victim)->request.priority >= top.request.priority) return;
    retract(victim);
    preemptions_ += 1;
    order_waiting();  // the retracted request goes behind the higher-priority ones
  }
}

// Slots the running requests past their prefill take this step: each has sampled a token and
// runs it next (with its drafts and their scratch under speculation).
int64_t GroupScheduler::decode_slots() const {
  int64_t n = 0;
  for (const auto& r : running_) n += r->prefill_done() ? r->decode_slots() : 0;
  return n;
}

// Every running request whose prefill is done runs its last sampled token (without mixed steps
// this is called only when no request is prefilling, so that is all of them).
void GroupScheduler::decode_running(runtime::GroupPlan& plan) {
  retract_until_decode_fits();
  for (const auto& r : running_) {
    if (!r->prefill_done()) continue;
    if (r->generated.empty())
      fail("request {} would decode before its prefill sampled a token", r->id);
    plan.seqs.push_back(decode(*r));
    planned_decode_tokens_ += static_cast<int64_t>(plan.seqs.back().new_tokens.size());
  }
  new_token_ratio_ = std::max(kMinNewTokenRatio, new_token_ratio_ - kNewTokenRatioDecay);
}

// The first waiting request (the highest priority, after order_waiting) outranks every running
// request, and some are running.
bool GroupScheduler::outranks_running() const {
  if (waiting_.empty() || running_.empty()) return false;
  const int32_t top = waiting_.front()->request.priority;
  return std::all_of(running_.begin(), running_.end(),
                     [top](const auto& r) { return r->request.priority < top; });
}

runtime::GroupPlan GroupScheduler::plan_step(int64_t prefill_budget) {
  runtime::GroupPlan plan;
  planned_decode_tokens_ = 0;
  plans_ += 1;
  for (auto& r : running_) trim_speculation(*r);
  // The prompt chunks the last step ran enter the radix cache, so that requests admitted from
  // now on reuse them while their requests still run (with snapshots, publish_prefix runs when a
  // snapshot is planned instead).
  if (limits_.radix_cache && !snapshots_on()) {
    for (auto& r : running_)
      if (r->n_prefilled > r->n_prefix_slots) publish_prefix(*r, r->n_prefilled);
  }
  if (limits_.priority) preempt_for_priority();
  // A waiting request that outranks every running one prefills in a step of its own: its first
  // token then waits for its prefill alone, not for the running requests' decodes too.
  const bool urgent = limits_.priority && outranks_running();
  // Mixed steps: the decodes take their KV slots first, then prompt chunks fill the budget, so
  // the weights a step streams serve both and no decode waits behind a long prefill.
  if (limits_.mixed_steps && !urgent) decode_running(plan);
  int64_t chunk_budget = std::min(limits_.chunk_tokens, prefill_budget);
  bool prefill_started = false;
  // The chunked requests continue first, then waiting requests are admitted.
  for (auto& r : running_) {
    if (!r->prefill_done() && chunk_budget > 0) {
      plan.seqs.push_back(prefill_chunk(*r, chunk_budget));
      chunk_budget -= static_cast<int64_t>(plan.seqs.back().new_tokens.size());
      prefill_started = true;
    }
  }
  admit_waiting(plan, chunk_budget, prefill_started);
  // Without mixing, prefill first (SGLang's default): a group decodes only when it has no
  // prompt work (so too when an urgent request could not be admitted after all).
  if ((!limits_.mixed_steps || urgent) && plan.seqs.empty()) decode_running(plan);
  return plan;
}

}  // namespace mlaserve::sched
