#include "runtime/static_planner.h"

#include <algorithm>

#include "core/error.h"

namespace mlaserve::runtime {

StaticPlanner::StaticPlanner(int groups, int64_t kv_tokens_per_group,
                             std::vector<StaticRequest> requests, int64_t prefill_per_step)
    : requests_(std::move(requests)),
      outputs_(requests_.size()),
      seqs_(requests_.size()),
      prefill_per_step_(prefill_per_step) {
  for (int g = 0; g < groups; ++g) allocators_.emplace_back(kv_tokens_per_group);
  for (size_t i = 0; i < seqs_.size(); ++i) {
    if (requests_[i].prompt.empty())
      fail("prompt {} is empty: every prompt needs at least one token", i);
    seqs_[i].group = static_cast<int>(i % static_cast<size_t>(groups));
  }
}

int64_t StaticPlanner::kv_tokens_needed(const std::vector<StaticRequest>& requests, int groups) {
  std::vector<int64_t> per_group(static_cast<size_t>(groups), 0);
  for (size_t i = 0; i < requests.size(); ++i) {
    per_group[i % static_cast<size_t>(groups)] +=
        static_cast<int64_t>(requests[i].prompt.size()) + requests[i].max_new_tokens;
  }
  return std::max<int64_t>(1, *std::max_element(per_group.begin(), per_group.end()));
}

bool StaticPlanner::finished(size_t i) const {
  return seqs_[i].admitted &&
         static_cast<int64_t>(outputs_[i].generated.size()) >= requests_[i].max_new_tokens &&
         seqs_[i].n_cached > 0;
}

bool StaticPlanner::done() const {
  for (size_t i = 0; i < seqs_.size(); ++i) {
    if (!finished(i)) return false;
  }
  return true;
}

StepPlan StaticPlanner::next_plan() {
  StepPlan plan;
  plan.groups.resize(allocators_.size());
  std::vector<int64_t> admitted(allocators_.size(), 0);
  for (size_t i = 0; i < seqs_.size(); ++i) {  // prefill first: admit waiting prompts
    Sequence& s = seqs_[i];
    const auto g = static_cast<size_t>(s.group);
    if (s.admitted || admitted[g] >= prefill_per_step_) continue;
    const StaticRequest& r = requests_[i];
    s.slots = allocators_[g].allocate(static_cast<int64_t>(r.prompt.size()) + r.max_new_tokens);
    s.admitted = true;
    admitted[g] += 1;
    PlannedSequence p;
    p.id = i;
    p.new_tokens = r.prompt;
    p.kv_slots.assign(s.slots.begin(), s.slots.begin() + static_cast<long>(r.prompt.size()));
    p.all_logits = r.all_logits;
    p.return_logits = r.return_logits;
    if (r.mtp) p.mtp_tokens.assign(r.prompt.begin() + 1, r.prompt.end());
    plan.groups[g].seqs.push_back(std::move(p));
  }
  for (size_t i = 0; i < seqs_.size(); ++i) {  // groups that admitted nothing decode
    const Sequence& s = seqs_[i];
    if (!s.admitted || s.n_cached == 0 || finished(i) || admitted[static_cast<size_t>(s.group)] > 0)
      continue;
    PlannedSequence p;
    p.id = i;
    p.n_cached = s.n_cached;
    p.new_tokens = {outputs_[i].generated.back()};
    p.kv_slots.assign(s.slots.begin(), s.slots.begin() + s.n_cached + 1);
    p.return_logits = requests_[i].return_logits;
    plan.groups[static_cast<size_t>(s.group)].seqs.push_back(std::move(p));
  }
  return plan;
}

void StaticPlanner::apply(const std::vector<SequenceResult>& results) {
  for (const SequenceResult& r : results) {
    const auto i = static_cast<size_t>(r.id);
    Sequence& s = seqs_[i];
    StaticOutput& out = outputs_[i];
    const bool prefill = s.n_cached == 0;
    s.n_cached += prefill ? static_cast<int64_t>(requests_[i].prompt.size()) : 1;
    if (prefill) {
      out.prompt_logits = r.logits;
      out.mtp_logits = r.mtp_logits;
    } else {
      out.step_logits.push_back(r.logits);
    }
    if (static_cast<int64_t>(out.generated.size()) < requests_[i].max_new_tokens)
      out.generated.push_back(r.token);
    if (finished(i)) allocators_[static_cast<size_t>(s.group)].release(s.slots);
  }
}

}  // namespace mlaserve::runtime
