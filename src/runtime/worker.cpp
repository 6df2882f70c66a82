#include "runtime/worker.h"

#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <exception>
#include <thread>

#include "core/error.h"
#include "kernels/parallel.h"
#include "parallel/collective_watchdog.h"

namespace mlaserve::runtime {

Worker::Worker(const parallel::Topology& topology, model::Model& model,
               const WorkerOptions& options)
    : topology_(topology),
      model_(model),
      communicators_(topology),
      step_comm_(topology, communicators_, options.comm),
      kv_(model.new_kv_store(options.kv_capacity_tokens, options.kv_dtype)) {}

Worker::~Worker() = default;

size_t Worker::reserve_step_buffers(int64_t group_tokens, int64_t logit_rows) {
  const model::ModelInfo& cfg = model_.info();
  // The MLP batch is every group of this model instance.
  size_t bytes = model_.reserve_step_buffers(
      group_tokens, group_tokens * topology_.groups_per_instance, logit_rows);
  bytes += step_comm_.reserve(group_tokens, logit_rows, cfg.hidden_size, cfg.vocab_size);
  if (model_.has_mtp()) {  // the MTP pass's inputs: [T, mtp_input_width] each
    for (std::vector<float>* h : {&final_hidden_, &mtp_hidden_}) {
      h->resize(static_cast<size_t>(group_tokens * cfg.mtp_input_width));
      h->clear();  // the capacity stays
      bytes += h->capacity() * sizeof(float);
    }
  }
  return bytes;
}

std::vector<SequenceResult> Worker::step(const StepPlan* plan_on_rank0, StepPlan* received) {
  parallel::watchdog_begin_step(stats_.steps + 1);
  StepPlan plan = broadcast_plan(plan_on_rank0);
  if (received) *received = plan;
  if (plan.shutdown) return {};
  const auto started = std::chrono::steady_clock::now();
  const int64_t forward_steps = stats_.steps;
  apply_snapshot_ops(plan);
  for (uint64_t id : plan.released) {
    samplers_.erase(id);
    spec_counts_.erase(id);
    kv_->release(id);
  }
  std::vector<SequenceResult> results = gather_results(run(plan));
  // The watchdog's deadline grows with the slowest step; idle plans (keep-alives) do not count.
  if (stats_.steps > forward_steps) {
    parallel::watchdog_end_step(
        std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count());
  }
  return results;
}

// The group's prefix snapshots change before the step's forward, so that a request admitted in
// this plan can continue from a snapshot made of a request released just before it.
void Worker::apply_snapshot_ops(const StepPlan& plan) {
  const auto group = static_cast<size_t>(topology_.group());
  if (group >= plan.groups.size()) return;  // a plan without groups (shutdown)
  for (const SnapshotOp& op : plan.groups[group].snapshot_ops) {
    switch (op.kind) {
      case SnapshotOp::Drop:
        kv_->drop_snapshot(op.key);
        break;
      case SnapshotOp::Keep:
        kv_->snapshot(op.id, op.n_tokens, op.key, true);
        break;
      case SnapshotOp::Forget:
        kv_->release(op.id);
        break;
    }
  }
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

std::span<const GroupPlan> Worker::instance_groups(const StepPlan& plan) const {
  const auto first = static_cast<size_t>(topology_.instance * topology_.groups_per_instance);
  return std::span(plan.groups).subspan(first, static_cast<size_t>(topology_.groups_per_instance));
}

// This rank's forward: its group's sequences as one StepInput; every group of the instance
// runs every layer (an idle group with 0 rows) so all collectives match.
std::vector<SequenceResult> Worker::run(const StepPlan& plan) {
  if (static_cast<int>(plan.groups.size()) != topology_.instances * topology_.groups_per_instance) {
    fail("internal: plan has {} groups, the layout {}", plan.groups.size(),
         topology_.options.describe());
  }
  std::vector<int64_t> group_rows;
  bool any_extend = false;
  for (const GroupPlan& gp : instance_groups(plan)) {
    group_rows.push_back(gp.n_tokens());
    any_extend = any_extend || (gp.n_tokens() > 0 && gp.extend());
  }
  if (std::all_of(group_rows.begin(), group_rows.end(), [](int64_t n) { return n == 0; }))
    return {};

  const GroupPlan& mine = plan.groups[static_cast<size_t>(topology_.group())];
  model::StepInput in;
  for (const PlannedSequence& s : mine.seqs) {
    const auto n_new = static_cast<int64_t>(s.new_tokens.size());
    const int64_t scratch = s.drafts_next() ? s.spec_steps - 1 : 0;
    if (static_cast<int64_t>(s.kv_slots.size()) != s.n_cached + n_new + scratch) {
      fail("internal: sequence {} has {} KV slots for {} tokens", s.id, s.kv_slots.size(),
           s.n_cached + n_new + scratch);
    }
    for (int64_t j = 0; j < n_new; ++j) {
      in.tokens.push_back(s.new_tokens[static_cast<size_t>(j)]);
      in.positions.push_back(static_cast<int32_t>(s.n_cached + j));
      if (j >= n_new - s.logit_rows())
        in.logit_rows.push_back(static_cast<int64_t>(in.tokens.size()) - 1);
    }
    in.seqs.push_back({n_new, s.n_cached, s.step_slots(), s.id, s.spec_verify});
  }
  const bool mtp = std::any_of(plan.groups.begin(), plan.groups.end(),
                               [](const GroupPlan& g) { return g.n_mtp_tokens() > 0; });
  step_comm_.begin_step(group_rows, any_extend);
  const std::vector<float> logits =
      model_.forward(in, *kv_, step_comm_, mtp ? &final_hidden_ : nullptr);
  stats_.steps += 1;
  stats_.padded_rows += step_comm_.gather_layout().padded_rows();

  const int64_t V = model_.info().vocab_size;
  std::vector<Speculation> spec(mine.seqs.size());
  int64_t row = 0;  // the sequence's first logits row
  for (size_t i = 0; i < mine.seqs.size(); ++i) {
    const PlannedSequence& s = mine.seqs[i];
    if (s.drafts_next()) spec[i] = accept_drafts(s, logits.data() + row * V);
    row += s.logit_rows();
  }
  const std::vector<float> mtp_logits = mtp ? run_mtp(plan, spec) : std::vector<float>{};
  // After the MTP passes, so that a snapshot holds the MTP module's state of its tokens too.
  for (const PlannedSequence& s : mine.seqs) {
    if (s.snapshot_key >= 0)
      kv_->snapshot(s.id, s.n_cached + static_cast<int64_t>(s.new_tokens.size()), s.snapshot_key,
                    false);
  }
  if (!topology_.group_leader()) return {};

  // Each sequence's first logits row and first MTP logits row.
  const size_t n = mine.seqs.size();
  std::vector<int64_t> first_row(n), first_mtp_row(n);
  for (size_t i = 1; i < n; ++i) {
    first_row[i] = first_row[i - 1] + mine.seqs[i - 1].logit_rows();
    first_mtp_row[i] =
        first_mtp_row[i - 1] + (mine.seqs[i - 1].return_logits
                                    ? static_cast<int64_t>(mine.seqs[i - 1].mtp_tokens.size())
                                    : 0);
  }
  for (const PlannedSequence& s : mine.seqs)
    if (uses_sampler(s)) samplers_.try_emplace(s.id, s.sampling);
  // Sampling a token from a DeepSeek vocabulary costs ~1-2 ms (a weight per token, top-p's
  // search), an argmax ~0.1 ms: the group's sequences take their turns on the kernels' threads
  // (each has its own sampler), where one after another they added that much per sequence to a
  // step. An error (NaN logits) goes up from the calling thread.
  std::vector<SequenceResult> results(n);
  std::vector<std::exception_ptr> errors(n);
  kernels::for_each_item(static_cast<int64_t>(n), n > 1, [&](int64_t item) {
    const auto i = static_cast<size_t>(item);
    try {
      results[i] = sequence_result(mine.seqs[i], logits.data() + first_row[i] * V, spec[i],
                                   mtp_logits.data() + first_mtp_row[i] * V);
    } catch (...) {
      errors[i] = std::current_exception();
    }
  });
  for (const std::exception_ptr& error : errors)
    if (error) std::rethrow_exception(error);
  return results;
}

// The leader's result of one sequence: `rows` its logits rows, `mtp_rows` its MTP logits rows
// (read where it returns logits).
SequenceResult Worker::sequence_result(const PlannedSequence& s, const float* rows,
                                       Speculation& spec, const float* mtp_rows) {
  const int64_t V = model_.info().vocab_size;
  const float* last = rows + (s.logit_rows() - 1) * V;
  SequenceResult r;
  if (s.drafts_next()) {
    r.id = s.id;
    r.tokens = std::move(spec.tokens);
    r.drafts = std::move(spec.drafts);
    // Token k of a verify step (or a prompt's first token) was chosen at the sequence's row k.
    for (size_t k = 0; k < r.tokens.size(); ++k)
      add_logprobs(s, rows + static_cast<int64_t>(k) * V, r.tokens[k], r);
  } else {
    r = pick_token(s, last);
  }
  if (s.return_logits) {
    r.logits.assign(rows, last + V);
    r.mtp_logits.assign(mtp_rows, mtp_rows + static_cast<int64_t>(s.mtp_tokens.size()) * V);
  }
  return r;
}

// Verification, on every rank of the group alike (they hold the same logits, and the random
// choices come from counter_uniform of the request's seed and the token's position): row j of
// a verify step gives the distribution of the token after new_tokens[j], against which draft
// j + 1 is kept or replaced (speculative sampling: the tokens are distributed as without
// drafts; greedy keeps a draft that is the argmax). Past the last kept draft the row's own
// choice comes with them. A prefill's last row gives the request's first token. With penalties
// (or a logit_bias, which the same edit applies)
// each row is penalised by the counts of every token before its own, the drafts kept before it
// included, as decoding them one at a time would (any draft keeps the distribution; draft_token
// penalises them too, so that they are kept more often).
Worker::Speculation Worker::accept_drafts(const PlannedSequence& s, const float* rows) {
  const auto V = static_cast<size_t>(model_.info().vocab_size);
  const uint64_t seed = s.sampling.seed.value_or(0);
  sampling::TokenCounts* counts =
      s.sampling.edits_logits() ? &spec_counts_.try_emplace(s.id).first->second : nullptr;
  const auto row = [&](int64_t r) {
    const std::span<const float> raw(rows + static_cast<size_t>(r) * V, V);
    return counts ? penalised(raw, *counts, s.sampling) : raw;
  };
  // The uniform streams of the token at `position`: 0 accepts a draft, 1 draws instead.
  const auto u = [&](int64_t position, uint64_t stream) {
    return sampling::counter_uniform(seed, position, stream);
  };
  Speculation spec;
  const auto keep = [&](int32_t token) {
    spec.tokens.push_back(token);
    if (counts) (*counts)[token] += 1;
  };
  const auto n_new = static_cast<int64_t>(s.new_tokens.size());
  if (!s.spec_verify) {
    spec.accepted_row = n_new - 1;
    keep(sampling::draw_with(row(0), s.sampling, u(s.n_cached + n_new, 1), candidates_));
    return spec;
  }
  for (int64_t j = 0; j < n_new; ++j) {
    const int64_t position = s.n_cached + j + 1;
    spec.accepted_row = j;
    if (j == n_new - 1) {
      keep(sampling::draw_with(row(j), s.sampling, u(position, 1), candidates_));
      break;
    }
    const sampling::SpeculativeChoice c =
        sampling::verify_draft(row(j), s.sampling, s.new_tokens[static_cast<size_t>(j + 1)],
                               u(position, 0), u(position, 1), candidates_);
    keep(c.token);
    if (!c.accepted) break;
  }
  return spec;
}

// The MTP module's passes. The first runs over every planned MTP row: a drafting sequence's new
// tokens (row j with the main model's final hidden state of that row and the token after it:
// the next new token up to the accepted row, then the model's own token; rows past it are
// rejected drafts whose latents land in slots about to be freed), and the teacher-forced rows of
// mtp_tokens. Its logits at a drafting sequence's accepted row give the first draft; each chained
// pass then runs one row per drafting sequence, at the next position, with the previous draft
// and the previous pass's normalised output as h. Every group of the instance runs every pass
// (an idle one with 0 rows) so the collectives match. Returns the teacher-forced rows' logits,
// computed only for the sequences that return logits (eval): a served prompt's chunks run the
// MTP module for its cache alone, and the lm_head over every prompt token would cost more than
// the module itself.
std::vector<float> Worker::run_mtp(const StepPlan& plan, std::vector<Speculation>& spec) {
  std::vector<int64_t> group_rows, drafting_rows;
  bool any_extend = false;
  int32_t steps = 0;
  for (const GroupPlan& gp : instance_groups(plan)) {
    group_rows.push_back(gp.n_mtp_tokens());
    drafting_rows.push_back(gp.n_drafting());
    any_extend = any_extend || (gp.n_mtp_tokens() > 0 && gp.mtp_extend());
    for (const PlannedSequence& s : gp.seqs)
      steps = std::max(steps, s.drafts_next() ? s.spec_steps : 0);
  }
  if (std::all_of(group_rows.begin(), group_rows.end(), [](int64_t n) { return n == 0; }))
    return {};
  const int64_t H = model_.info().mtp_input_width, V = model_.info().vocab_size;
  const std::vector<PlannedSequence>& seqs =
      plan.groups[static_cast<size_t>(topology_.group())].seqs;
  model::StepInput in;
  std::vector<float>& h = mtp_hidden_;
  h.clear();
  std::vector<int64_t> teacher_rows, draft_rows;  // logit rows of in, in sequence order
  int64_t row = 0;                                // the sequence's first row in the main pass
  for (size_t i = 0; i < seqs.size(); ++i) {
    const PlannedSequence& s = seqs[i];
    const int64_t n = s.n_mtp_rows();
    if (n > static_cast<int64_t>(s.new_tokens.size()))
      fail("internal: sequence {} has {} MTP rows for {} new tokens", s.id, n, s.new_tokens.size());
    for (int64_t j = 0; j < n; ++j) {
      int32_t next = 0;
      if (!s.drafts_next()) {
        next = s.mtp_tokens[static_cast<size_t>(j)];
      } else {
        next = j < spec[i].accepted_row ? s.new_tokens[static_cast<size_t>(j + 1)]
                                        : spec[i].tokens.back();
      }
      in.tokens.push_back(next);
      in.positions.push_back(static_cast<int32_t>(s.n_cached + j));
    }
    const int64_t first = static_cast<int64_t>(in.tokens.size()) - n;
    if (s.drafts_next()) {
      draft_rows.push_back(first + spec[i].accepted_row);
    } else if (s.return_logits) {  // a prompt chunk's rows only fill the MTP module's cache
      for (int64_t j = 0; j < n; ++j) teacher_rows.push_back(first + j);
    }
    h.insert(h.end(), final_hidden_.begin() + row * H, final_hidden_.begin() + (row + n) * H);
    // A drafting sequence's rows past its accepted one are taken back by the next pass.
    if (n > 0)
      in.seqs.push_back({n, s.n_cached,
                         std::span(s.kv_slots).first(static_cast<size_t>(s.n_cached + n)), s.id,
                         s.drafts_next()});
    row += static_cast<int64_t>(s.new_tokens.size());
  }
  in.logit_rows = teacher_rows;
  in.logit_rows.insert(in.logit_rows.end(), draft_rows.begin(), draft_rows.end());
  step_comm_.begin_step(group_rows, any_extend);
  std::vector<float> head_hidden;
  std::vector<float> logits = model_.mtp_forward(in, h.data(), *kv_, step_comm_, &head_hidden);

  // Chained drafts: the k-th draft of a sequence comes from the row at its accepted position
  // + k - 1 (its MTP latent goes to the scratch slots the plan added).
  const auto n_teacher = static_cast<int64_t>(teacher_rows.size());
  std::vector<float> chain_h(head_hidden.begin() + n_teacher * H, head_hidden.end());
  // draft_logits: one row per drafting sequence, in sequence order.
  const auto take_drafts = [&](const float* draft_logits) {
    size_t d = 0;
    for (size_t i = 0; i < seqs.size(); ++i) {
      if (!seqs[i].drafts_next()) continue;
      spec[i].drafts.push_back(
          draft_token(seqs[i], draft_logits + d * static_cast<size_t>(V), spec[i].drafts));
      ++d;
    }
  };
  take_drafts(logits.data() + n_teacher * V);
  for (int32_t k = 2; k <= steps; ++k) {
    model::StepInput chain;
    for (size_t i = 0; i < seqs.size(); ++i) {
      const PlannedSequence& s = seqs[i];
      if (!s.drafts_next()) continue;
      const int64_t position = s.n_cached + spec[i].accepted_row + k - 1;
      chain.tokens.push_back(spec[i].drafts.back());
      chain.positions.push_back(static_cast<int32_t>(position));
      chain.logit_rows.push_back(static_cast<int64_t>(chain.tokens.size()) - 1);
      chain.seqs.push_back({1, position,
                            std::span(s.kv_slots).first(static_cast<size_t>(position + 1)), s.id,
                            true});
    }
    step_comm_.begin_step(drafting_rows, false);
    std::vector<float> next_h;
    take_drafts(model_.mtp_forward(chain, chain_h.data(), *kv_, step_comm_, &next_h).data());
    chain_h = std::move(next_h);
  }
  logits.resize(static_cast<size_t>(n_teacher * V));  // the teacher-forced rows come first
  return logits;
}

// `row` with `counts`' penalties and the logit_bias applied, in penalised_row_ (valid until the
// next call).
std::span<const float> Worker::penalised(std::span<const float> row,
                                         const sampling::TokenCounts& counts,
                                         const sampling::SamplingParams& params) {
  penalised_row_.assign(row.begin(), row.end());
  sampling::edit_logits(penalised_row_, counts, params);
  return penalised_row_;
}

// A draft: the MTP row's argmax, on every rank of the group alike. With penalties the row is
// penalised as the verify step will penalise the draft's row (the counts so far, this step's
// kept tokens included, and the drafts before it), so that drafts the penalties would reject
// are not proposed (brown-tiny-mtp with penalties, 1-3 drafts per step: accept length 1.30-1.42
// with unpenalised drafts, 1.49-1.81 with these; bench/speculative_ab.py).
int32_t Worker::draft_token(const PlannedSequence& s, const float* row,
                            const std::vector<int32_t>& earlier_drafts) {
  const auto V = static_cast<size_t>(model_.info().vocab_size);
  const std::span<const float> raw(row, V);
  if (!s.sampling.edits_logits()) return sampling::argmax(raw);
  sampling::TokenCounts counts = spec_counts_[s.id];
  for (int32_t token : earlier_drafts) counts[token] += 1;
  return sampling::argmax(penalised(raw, counts, s.sampling));
}

// Whether the leader picks a sequence's token with the request's sampler: greedy without
// penalties needs no state; anything else has its RNG and token counts live here from the first
// token to release.
bool Worker::uses_sampler(const PlannedSequence& s) {
  return s.sample && !s.drafts_next() && !(s.sampling.greedy() && !s.sampling.edits_logits());
}

// The group leader samples (uses_sampler; run() made the sampler).
SequenceResult Worker::pick_token(const PlannedSequence& s, const float* last_row) {
  SequenceResult r;
  r.id = s.id;
  if (!s.sample) return r;
  const auto V = static_cast<size_t>(model_.info().vocab_size);
  const std::span<const float> raw(last_row, V);
  const bool stateful = uses_sampler(s);
  if (!stateful && s.allowed_tokens.empty()) {
    r.token = sampling::argmax(raw);
  } else {
    std::vector<float> row(raw.begin(), raw.end());
    if (!s.allowed_tokens.empty()) sampling::mask_disallowed(row, s.allowed_tokens);
    r.token = stateful ? samplers_.at(s.id).sample(row) : sampling::argmax(row);
  }
  add_logprobs(s, raw.data(), r.token, r);
  return r;
}

// Logprobs report the model's own distribution (the row's raw logits), before a grammar's mask
// or a speculative choice.
void Worker::add_logprobs(const PlannedSequence& s, const float* row, int32_t token,
                          SequenceResult& r) const {
  if (s.top_logprobs < 0) return;
  const auto V = static_cast<size_t>(model_.info().vocab_size);
  sampling::LogprobResult lp = sampling::logprobs(std::span(row, V), token, s.top_logprobs);
  r.logprobs.push_back(lp.chosen.logprob);
  r.top.insert(r.top.end(), lp.top.begin(), lp.top.end());
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
