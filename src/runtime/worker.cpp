#include "runtime/worker.h"

#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <thread>

#include "core/error.h"
#include "parallel/collective_watchdog.h"

namespace mlaserve::runtime {

Worker::Worker(const parallel::Topology& topology, model::DeepseekModel& model,
               const WorkerOptions& options)
    : topology_(topology),
      model_(model),
      communicators_(topology),
      step_comm_(topology, communicators_, options.comm),
      kv_(model.config().num_hidden_layers, model.config().kv_cache_dim(),
          options.kv_capacity_tokens, options.kv_dtype) {}

Worker::~Worker() = default;

std::vector<SequenceResult> Worker::step(const StepPlan* plan_on_rank0, StepPlan* received) {
  parallel::watchdog_begin_step(stats_.steps + 1);
  StepPlan plan = broadcast_plan(plan_on_rank0);
  if (received) *received = plan;
  if (plan.shutdown) return {};
  const auto started = std::chrono::steady_clock::now();
  const int64_t forward_steps = stats_.steps;
  for (uint64_t id : plan.released) samplers_.erase(id);
  std::vector<SequenceResult> results = gather_results(run(plan));
  // The watchdog's deadline grows with the slowest step; idle plans (keep-alives) do not count.
  if (stats_.steps > forward_steps) {
    parallel::watchdog_end_step(
        std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count());
  }
  return results;
}

// Non-root ranks wait for the next plan with a non-blocking broadcast polled with a growing
// sleep (up to 1 ms), so an idle server's ranks do not busy-poll the cores. An idle rank 0 sends
// keep-alive plans, so a wait past the watchdog's deadline means rank 0 or its host is gone.
StepPlan Worker::broadcast_plan(const StepPlan* plan) {
  const parallel::CollectiveWait wait("the broadcast of the step plan", "world",
                                      parallel::kNoLayer);
  std::vector<uint8_t> bytes;
  uint64_t size = 0;
  if (topology_.world_rank == 0) {
    bytes = plan->encode();
    size = bytes.size();
  }
  MPI_Request request;
  MPI_Ibcast(&size, 1, MPI_UINT64_T, 0, MPI_COMM_WORLD, &request);
  int done = 0;
  for (int64_t pause_us = 0; MPI_Test(&request, &done, MPI_STATUS_IGNORE), !done;
       pause_us = std::min<int64_t>(2 * pause_us + 1, 1000)) {
    std::this_thread::sleep_for(std::chrono::microseconds(pause_us));
  }
  bytes.resize(size);
  MPI_Bcast(bytes.data(), static_cast<int>(size), MPI_BYTE, 0, MPI_COMM_WORLD);
  return StepPlan::decode(bytes);
}

// This rank's forward: its group's sequences as one StepInput; every group of the instance
// runs every layer (an idle group with 0 rows) so all collectives match.
std::vector<SequenceResult> Worker::run(const StepPlan& plan) {
  if (static_cast<int>(plan.groups.size()) != topology_.instances * topology_.groups_per_instance) {
    fail("internal: plan has {} groups, the layout {}", plan.groups.size(),
         topology_.options.describe());
  }
  const int first_group = topology_.instance * topology_.groups_per_instance;
  std::vector<int64_t> group_rows;
  bool any_extend = false;
  for (int g = 0; g < topology_.groups_per_instance; ++g) {
    const GroupPlan& gp = plan.groups[static_cast<size_t>(first_group + g)];
    group_rows.push_back(gp.n_tokens());
    any_extend = any_extend || (gp.n_tokens() > 0 && gp.extend());
  }
  if (std::all_of(group_rows.begin(), group_rows.end(), [](int64_t n) { return n == 0; }))
    return {};

  const GroupPlan& mine = plan.groups[static_cast<size_t>(topology_.group())];
  model::StepInput in;
  for (const PlannedSequence& s : mine.seqs) {
    const auto n_new = static_cast<int64_t>(s.new_tokens.size());
    if (static_cast<int64_t>(s.kv_slots.size()) != s.n_cached + n_new) {
      fail("internal: sequence {} has {} KV slots for {} tokens", s.id, s.kv_slots.size(),
           s.n_cached + n_new);
    }
    for (int64_t j = 0; j < n_new; ++j) {
      in.tokens.push_back(s.new_tokens[static_cast<size_t>(j)]);
      in.positions.push_back(static_cast<int32_t>(s.n_cached + j));
      if (s.all_logits || j == n_new - 1)
        in.logit_rows.push_back(static_cast<int64_t>(in.tokens.size()) - 1);
    }
    in.seqs.push_back({n_new, s.n_cached, s.kv_slots});
  }
  step_comm_.begin_step(group_rows, any_extend);
  const std::vector<float> logits = model_.forward(in, kv_, step_comm_);
  stats_.steps += 1;
  stats_.padded_rows += step_comm_.gather_layout().padded_rows();
  if (!topology_.group_leader()) return {};

  const int64_t V = model_.config().vocab_size;
  std::vector<SequenceResult> results;
  int64_t row = 0;
  for (const PlannedSequence& s : mine.seqs) {
    const int64_t rows = s.all_logits ? static_cast<int64_t>(s.new_tokens.size()) : 1;
    const float* last = logits.data() + (row + rows - 1) * V;
    SequenceResult r = pick_token(s, last);
    if (s.return_logits) r.logits.assign(logits.data() + row * V, last + V);
    results.push_back(std::move(r));
    row += rows;
  }
  return results;
}

// The group leader samples: greedy without penalties needs no state; anything else uses the
// request's sampler (its RNG and token counts live here from the first token to release).
SequenceResult Worker::pick_token(const PlannedSequence& s, const float* last_row) {
  SequenceResult r;
  r.id = s.id;
  if (!s.sample) return r;
  const auto V = static_cast<size_t>(model_.config().vocab_size);
  const std::span<const float> raw(last_row, V);
  const sampling::SamplingParams& p = s.sampling;
  const bool stateless = p.greedy() && p.presence_penalty == 0.0f && p.frequency_penalty == 0.0f &&
                         p.repetition_penalty == 1.0f;
  if (stateless) {
    r.token = sampling::argmax(raw);
  } else {
    std::vector<float> row(raw.begin(), raw.end());
    r.token = samplers_.try_emplace(s.id, p).first->second.sample(row);
  }
  if (s.top_logprobs >= 0) {
    sampling::LogprobResult lp = sampling::logprobs(raw, r.token, s.top_logprobs);
    r.logprob = lp.chosen.logprob;
    r.top = std::move(lp.top);
  }
  return r;
}

std::vector<SequenceResult> Worker::gather_results(const std::vector<SequenceResult>& mine) {
  const parallel::CollectiveWait wait("the gather of the results", "world", parallel::kNoLayer);
  const std::vector<uint8_t> bytes = mine.empty() ? std::vector<uint8_t>{} : encode_results(mine);
  const int size = static_cast<int>(bytes.size());
  std::vector<int> sizes(static_cast<size_t>(topology_.world_size));
  MPI_Gather(&size, 1, MPI_INT, sizes.data(), 1, MPI_INT, 0, MPI_COMM_WORLD);
  std::vector<int> displs(sizes.size(), 0);
  for (size_t r = 1; r < sizes.size(); ++r) displs[r] = displs[r - 1] + sizes[r - 1];
  std::vector<uint8_t> all(
      topology_.world_rank == 0 ? static_cast<size_t>(displs.back() + sizes.back()) : 0);
  MPI_Gatherv(bytes.data(), size, MPI_BYTE, all.data(), sizes.data(), displs.data(), MPI_BYTE, 0,
              MPI_COMM_WORLD);
  std::vector<SequenceResult> results;
  if (topology_.world_rank != 0) return results;
  for (size_t r = 0; r < sizes.size(); ++r) {
    if (sizes[r] == 0) continue;
    auto part = decode_results(
        std::span<const uint8_t>(all.data() + displs[r], static_cast<size_t>(sizes[r])));
    std::move(part.begin(), part.end(), std::back_inserter(results));
  }
  return results;
}

}  // namespace mlaserve::runtime
