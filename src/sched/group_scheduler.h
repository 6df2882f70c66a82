// One DP group's scheduler on rank 0 (metadata only: queues and KV slots; the KV itself lives on
// the group's ranks). Each step the group either prefills (continuing its chunked request first,
// then admitting waiting requests within the budgets) or decodes its running requests.
#pragma once

#include <deque>
#include <memory>
#include <vector>

#include "cache/latent_kv_pool.h"
#include "engine/plan.h"
#include "sched/active_request.h"

namespace mlaserve::sched {

struct GroupLimits {
  int64_t chunk_tokens = 8192;    // prefill tokens per step (the global budget divided by dp)
  int64_t max_running = 256;      // requests admitted at once (the global limit divided by dp)
};

class GroupScheduler {
 public:
  GroupScheduler(int64_t kv_capacity_tokens, const GroupLimits& limits);

  void enqueue(std::shared_ptr<ActiveRequest> request);
  // Removes a request wherever it is and frees its KV; false if unknown.
  bool remove(uint64_t id);

  // This group's part of the next step (empty: idle).
  engine::GroupPlan plan_step();

  // The group's requests that are admitted and not finished, by id order of admission.
  const std::vector<std::shared_ptr<ActiveRequest>>& running() const { return running_; }
  size_t waiting() const { return waiting_.size(); }
  int64_t kv_capacity() const { return slots_.capacity(); }
  int64_t kv_used() const { return slots_.capacity() - slots_.free_slots(); }
  int64_t outstanding_tokens() const;
  bool fits_ever(const ActiveRequest& r) const { return r.kv_tokens_needed() <= slots_.capacity(); }

 private:
  engine::PlannedSequence prefill_chunk(ActiveRequest& r, int64_t max_tokens);
  engine::PlannedSequence decode(const ActiveRequest& r) const;

  GroupLimits limits_;
  cache::SlotAllocator slots_;
  std::deque<std::shared_ptr<ActiveRequest>> waiting_;
  std::vector<std::shared_ptr<ActiveRequest>> running_;  // admitted: prefilling or decoding
};

}  // namespace mlaserve::sched
