#include "sched/group_scheduler.h"

#include <algorithm>

namespace mlaserve::sched {

GroupScheduler::GroupScheduler(int64_t kv_capacity_tokens, const GroupLimits& limits)
    : limits_(limits), slots_(kv_capacity_tokens) {}

void GroupScheduler::enqueue(std::shared_ptr<ActiveRequest> request) { waiting_.push_back(std::move(request)); }

bool GroupScheduler::remove(uint64_t id) {
  auto match = [id](const auto& r) { return r->id == id; };
  if (auto it = std::find_if(waiting_.begin(), waiting_.end(), match); it != waiting_.end()) {
    waiting_.erase(it);
    return true;
  }
  if (auto it = std::find_if(running_.begin(), running_.end(), match); it != running_.end()) {
    slots_.release((*it)->slots);
    running_.erase(it);
    return true;
  }
  return false;
}

int64_t GroupScheduler::outstanding_tokens() const {
  int64_t n = 0;
  for (const auto& r : waiting_) n += r->outstanding_tokens();
  for (const auto& r : running_) n += r->outstanding_tokens();
  return n;
}

// The next prompt chunk of r; the leader samples only after the last one.
engine::PlannedSequence GroupScheduler::prefill_chunk(ActiveRequest& r, int64_t max_tokens) {
  engine::PlannedSequence p;
  p.id = r.id;
  p.n_cached = r.n_prefilled;
  const int64_t n = std::min(max_tokens, r.prompt_len() - r.n_prefilled);
  p.new_tokens.assign(r.request.prompt.begin() + r.n_prefilled, r.request.prompt.begin() + r.n_prefilled + n);
  p.kv_slots.assign(r.slots.begin(), r.slots.begin() + r.n_prefilled + n);
  r.n_prefilled += n;
  p.sample = r.prefill_done();
  p.sampling = r.request.sampling;
  p.top_logprobs = r.request.logprobs ? r.request.top_logprobs : -1;
  return p;
}

engine::PlannedSequence GroupScheduler::decode(const ActiveRequest& r) const {
  engine::PlannedSequence p;
  p.id = r.id;
  p.n_cached = r.prompt_len() + static_cast<int64_t>(r.generated.size()) - 1;
  p.new_tokens = {r.generated.back()};
  p.kv_slots.assign(r.slots.begin(), r.slots.begin() + p.n_cached + 1);
  p.sampling = r.request.sampling;
  p.top_logprobs = r.request.logprobs ? r.request.top_logprobs : -1;
  return p;
}

engine::GroupPlan GroupScheduler::plan_step() {
  engine::GroupPlan plan;
  int64_t budget = limits_.chunk_tokens;
  // Prefill first (SGLang): the chunked request continues, then waiting requests are admitted
  // while the chunk budget, the running limit and KV space (prompt + max_new reserved) allow.
  for (auto& r : running_) {
    if (!r->prefill_done() && budget > 0) {
      plan.seqs.push_back(prefill_chunk(*r, budget));
      budget -= static_cast<int64_t>(plan.seqs.back().new_tokens.size());
    }
  }
  while (!waiting_.empty() && budget > 0 && static_cast<int64_t>(running_.size()) < limits_.max_running &&
         waiting_.front()->kv_tokens_needed() <= slots_.free_slots()) {
    std::shared_ptr<ActiveRequest> r = waiting_.front();
    waiting_.pop_front();
    r->slots = slots_.allocate(r->kv_tokens_needed());
    running_.push_back(r);
    plan.seqs.push_back(prefill_chunk(*r, budget));
    budget -= static_cast<int64_t>(plan.seqs.back().new_tokens.size());
  }
  if (!plan.seqs.empty()) return plan;
  for (const auto& r : running_) {
    if (r->prefill_done() && !r->generated.empty()) plan.seqs.push_back(decode(*r));
  }
  return plan;
}

}  // namespace mlaserve::sched
