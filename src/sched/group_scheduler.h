// One DP group's scheduler on rank 0 (metadata only: queues, KV slots and the radix prefix
// cache; the KV itself lives on the group's ranks). Each step every running request past its
// prefill decodes one token (retracting the least advanced ones when the KV pool runs out) and
// prompt chunks fill the step's prefill budget: the chunked request first, then waiting requests
// admitted within the budgets. Without mixed steps a step either prefills or decodes.
#pragma once

#include <deque>
#include <limits>
#include <memory>
#include <span>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "cache/latent_kv_pool.h"
#include "cache/radix_cache.h"
#include "runtime/plan.h"
#include "sched/active_request.h"

namespace mlaserve::sched {

// fcfs: arrival order. lpm: longest cached prefix first (SGLang's "lpm"), so requests sharing a
// prefix run while it is cached.
enum class SchedulePolicy { Fcfs, LongestPrefixMatch };
SchedulePolicy parse_schedule_policy(const std::string& name);

struct GroupLimits {
  int64_t chunk_tokens = 8192;         // prefill tokens per step; longer prompts are chunked
  int64_t max_prefill_tokens = 16384;  // prompt tokens admitted per step (the first always fits)
  int64_t max_running = 256;           // requests admitted at once (the global limit divided by dp)
  bool radix_cache = true;
  // A family whose state after a prefix is not a row per token (DeepSeek-V4: a window ring and
  // the compressors' sums) reuses a cached prefix only up to a snapshot of that state, kept by
  // the group's KV stores: at most max_snapshots at once, least recently used going first. 0: any
  // cached prefix is reusable (a slot's rows are all it needs).
  int64_t max_snapshots = 0;
  // Shorter prefixes get no snapshot: restoring them saves less than the snapshot costs.
  int64_t min_snapshot_tokens = 1;
  bool mixed_steps = true;  // decodes ride along prompt chunks (else a step prefills or decodes)
  SchedulePolicy policy = SchedulePolicy::Fcfs;
  // Waiting requests ordered by GenerationRequest::priority first; a running request of lower
  // priority is retracted when a higher one cannot be admitted.
  bool priority = false;
};

class GroupScheduler {
 public:
  GroupScheduler(int64_t kv_capacity_tokens, const GroupLimits& limits);

  void enqueue(std::shared_ptr<ActiveRequest> request);
  // Removes a request wherever it is; its computed KV goes to the radix cache (or is freed).
  bool remove(uint64_t id);
  // Drops the radix cache; false (nothing dropped) while requests are queued or running.
  bool flush_cache();

  // This group's part of the next step (empty: idle), running at most prefill_budget prompt
  // tokens (and never more than limits.chunk_tokens).
  runtime::GroupPlan plan_step(int64_t prefill_budget = std::numeric_limits<int64_t>::max());
  // Tokens of the last plan's decodes, drafts to verify included; its other tokens are prompt
  // tokens. (A plan's shapes cannot tell them apart: a prompt's last chunk can be one token over
  // a cached prefix, and a decode that verifies drafts runs several.)
  int64_t planned_decode_tokens() const { return planned_decode_tokens_; }

  // The group's requests that are admitted and not finished, by order of admission.
  const std::vector<std::shared_ptr<ActiveRequest>>& running() const { return running_; }
  size_t waiting() const { return waiting_.size(); }
  int64_t kv_capacity() const { return slots_.capacity(); }
  // Slots held by admitted requests (cached prefixes nobody uses count as free).
  int64_t kv_used() const { return slots_.capacity() - available(); }
  int64_t cached_tokens() const { return cache_.cached_tokens(); }
  int64_t snapshots() const { return static_cast<int64_t>(snapshots_.size()); }
  // The changes to the group's snapshots since the last plan that ran (the engine sends them with
  // the next one).
  std::vector<runtime::SnapshotOp> take_snapshot_ops() { return std::exchange(snapshot_ops_, {}); }
  int64_t retractions() const { return retractions_; }
  // Running requests retracted for a higher-priority waiting one (counted in retractions too).
  int64_t preemptions() const { return preemptions_; }
  int64_t outstanding_tokens() const;
  // Prompt tokens of r this group's radix cache holds (0 with the cache off).
  int64_t cached_prefix_length(const ActiveRequest& r);
  bool fits_ever(const ActiveRequest& r) const { return r.kv_tokens_needed() <= slots_.capacity(); }

 private:
  cache::RadixCache::Match match_cached_prefix(const ActiveRequest& r);
  // Of a match, the leading tokens a request can continue from: all of them, or with snapshots
  // up to the longest one.
  int64_t reusable_length(const cache::RadixCache::Match& match) const;
  bool snapshots_on() const { return limits_.radix_cache && limits_.max_snapshots > 0; }
  bool awaits_snapshot(const cache::RadixCache::Match& match, int64_t n_match) const;
  bool shares_a_prefill_in_flight(const ActiveRequest& r, int64_t n_match) const;
  // Registers a snapshot of n_tokens under key, made in the plan being built (shared: a prefix
  // that requests share, kept longer); false when every snapshot is in use by it (then none is
  // made).
  bool add_snapshot(int32_t key, int64_t n_tokens, bool shared);
  void free_slots(std::span<const int32_t> slots);  // their snapshots go too
  void snapshot_prefill(ActiveRequest& r, runtime::PlannedSequence& p);
  int64_t prefix_shared_with_waiting(const ActiveRequest& r) const;
  void publish_prefix(ActiveRequest& r, int64_t n);
  int64_t available() const { return slots_.free_slots() + cache_.evictable_tokens(); }
  int64_t expected_new_tokens(const ActiveRequest& r) const;
  int64_t decode_reservation() const;
  std::vector<int32_t> allocate(int64_t n);
  void order_waiting();
  bool try_admit(ActiveRequest& r, int64_t prefill_budget);
  void release_kv(ActiveRequest& r);
  void retract(std::vector<std::shared_ptr<ActiveRequest>>::iterator victim);
  void retract_until_decode_fits();
  void preempt_for_priority();
  bool outranks_running() const;

  runtime::PlannedSequence prefill_chunk(ActiveRequest& r, int64_t max_tokens);
  runtime::PlannedSequence decode(ActiveRequest& r);
  void admit_waiting(runtime::GroupPlan& plan, int64_t& chunk_budget, bool prefill_started);
  int64_t decode_slots() const;
  void trim_speculation(ActiveRequest& r);
  void add_speculation(ActiveRequest& r, runtime::PlannedSequence& p);
  void decode_running(runtime::GroupPlan& plan);

  GroupLimits limits_;
  cache::SlotAllocator slots_;
  cache::RadixCache cache_;
  std::deque<std::shared_ptr<ActiveRequest>> waiting_;
  std::vector<std::shared_ptr<ActiveRequest>> running_;  // admitted: prefilling or decoding
  // Share of each running request's remaining generation budget that admission keeps free
  // (SGLang's new_token_ratio): starts optimistic, decays while decoding goes well, and jumps
  // back after a retraction.
  double new_token_ratio_;
  int64_t planned_decode_tokens_ = 0;
  // The group's snapshots by key slot: the tokens they hold, the plan that made them (one made
  // after a step's forward is there for the plans after it) and the plan that last used them.
  struct Snapshot {
    int64_t n_tokens = 0;
    uint64_t made = 0, used = 0;
    bool shared = false;  // made where requests share a prefix, or some request continued from it
  };
  std::unordered_map<int32_t, Snapshot> snapshots_;
  std::vector<runtime::SnapshotOp> snapshot_ops_;
  uint64_t plans_ = 0;  // plans built, the clock of snapshot use
  int64_t retractions_ = 0;
  int64_t preemptions_ = 0;
};

}  // namespace mlaserve::sched
