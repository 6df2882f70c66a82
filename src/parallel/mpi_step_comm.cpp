#include "parallel/mpi_step_comm.h"

#include <algorithm>
#include <numeric>

#include "core/error.h"
#include "core/scratch.h"
#include "kernels/ops.h"

namespace mlaserve::parallel {

Communicators::Communicators(const Topology& t) {
  MPI_Comm_split(world, t.instance, t.layout.tp_rank, &tp);
  MPI_Comm_split(tp, t.group_in_instance(), t.layout.attn_tp_rank, &attn_tp);
  MPI_Comm_split(tp, t.layout.attn_tp_rank, t.group_in_instance(), &cross_dp);
}

Communicators::~Communicators() {
  for (MPI_Comm* c : {&cross_dp, &attn_tp, &tp}) {
    if (*c != MPI_COMM_NULL) MPI_Comm_free(c);
  }
}

MpiStepComm::MpiStepComm(const Topology& topology, const Communicators& comms,
                         const StepCommOptions& options)
    : topology_(topology),
      options_(options),
      tp_(comms.tp, "tp", &stats_, options.check_collectives),
      attn_tp_(comms.attn_tp, "attn_tp", &stats_, options.check_collectives),
      cross_dp_(comms.cross_dp, "cross_dp", &stats_, options.check_collectives) {}

void MpiStepComm::begin_step(const std::vector<int64_t>& group_rows, bool any_extend) {
  if (static_cast<int>(group_rows.size()) != topology_.groups_per_instance) {
    fail("internal: step has {} group counts for {} groups", group_rows.size(),
         topology_.groups_per_instance);
  }
  any_extend_ = any_extend;
  // Auto switches between MaxLen and SumLen with the step's contents, and the two add a token's
  // o_proj partials and its residual in different orders: deterministic inference keeps SumLen.
  const bool fixed = options_.padding == PaddingPolicy::Auto && kernels::deterministic_kernels();
  gather_ = plan_gather(group_rows, any_extend, fixed ? PaddingPolicy::SumLen : options_.padding);
  scatter_ = plan_scatter(gather_, attn_tp_.size());
  begin_layer(-1);  // the embedding's collectives come before layer 0; the check names it -1
}

// The bounds of each take() below for T rows per group: a group's rows padded to whole blocks
// of attn_tp rows (ReduceScatterBlock's rounding) is the largest per-group count, and the
// groups' rows together (N) the largest per-instance one; an all-reduce or reduce-scatter over
// tp moves at most N rows, one over attn_tp (the embedding, o_proj) a group's.
size_t MpiStepComm::reserve(int64_t group_tokens, int64_t logit_rows, int64_t hidden,
                            int64_t vocab) {
  const int64_t P = attn_tp_.size();
  const int64_t group_values = (group_tokens + P - 1) / P * P * hidden;
  const int64_t all_values = group_values * topology_.groups_per_instance;
  for (std::vector<float>* b : {&summed_, &padded_, &gathered_}) take(*b, all_values);
  take(shard_, group_values);
  take(vocab_blocks_, logit_rows * vocab);
  tp_.reserve(all_values);
  attn_tp_.reserve(group_values);
  return scratch_bytes();
}

size_t MpiStepComm::scratch_bytes() const {
  size_t bytes = tp_.scratch_bytes() + attn_tp_.scratch_bytes() + cross_dp_.scratch_bytes();
  for (const std::vector<float>* b : {&summed_, &padded_, &gathered_, &shard_, &vocab_blocks_})
    bytes += b->capacity() * sizeof(float);
  return bytes;
}

void MpiStepComm::begin_layer(int64_t layer) {
  for (Collectives* c : {&tp_, &attn_tp_, &cross_dp_}) c->set_layer(layer);
}

bool MpiStepComm::shard_tokens(int64_t n_tokens) const {
  return options_.dp_linear_min_tokens > 0 && any_extend_ && attn_tp_.size() > 1 &&
         n_tokens >= std::max<int64_t>(options_.dp_linear_min_tokens, attn_tp_.size());
}

model::Range MpiStepComm::token_shard(int64_t n_tokens) const {
  return model::shard_range(n_tokens, attn_tp_.rank(), attn_tp_.size());
}

void MpiStepComm::gather_token_rows(const float* shard, int64_t n_tokens, int64_t width,
                                    float* rows) {
  std::vector<int64_t> counts(static_cast<size_t>(attn_tp_.size()));
  for (int r = 0; r < attn_tp_.size(); ++r)
    counts[static_cast<size_t>(r)] =
        model::shard_range(n_tokens, r, attn_tp_.size()).size() * width;
  attn_tp_.all_gather_v(shard, counts, rows);
}

void MpiStepComm::sum_over_attn_tp(float* data, int64_t count) {
  attn_tp_.all_reduce_sum(data, count);
}

void MpiStepComm::attention_to_mlp(const float* attn_partial, float* residual, int64_t n_local,
                                   int64_t hidden, std::vector<float>& mlp_input) {
  const int group = topology_.group_in_instance();
  const int64_t offset = gather_.offsets[static_cast<size_t>(group)] * hidden;
  const int64_t local = n_local * hidden;
  if (gather_.mode == PaddingMode::SumLen || gather_.mode == PaddingMode::Legacy) {
    // One all-reduce over tp does both the o_proj reduction and the DP gather: each rank adds
    // its partial rows at its group's offset, the group leader also adds the residual.
    mlp_input.assign(static_cast<size_t>(gather_.mlp_rows * hidden), 0.0f);
    float* mine = mlp_input.data() + offset;
    std::copy_n(attn_partial, local, mine);
    if (topology_.group_leader()) {
      for (int64_t i = 0; i < local; ++i) mine[i] += residual[i];
    }
    tp_.all_reduce_sum(mlp_input.data(), gather_.mlp_rows * hidden);
    std::copy_n(mine, local, residual);
    return;
  }
  // MaxLen / Exact: complete the o_proj sum inside the group, then gather groups' rows.
  float* summed = take(summed_, local);
  std::copy_n(attn_partial, local, summed);
  attn_tp_.all_reduce_sum(summed, local);
  for (int64_t i = 0; i < local; ++i) residual[i] += summed[i];
  gather_reduced_rows(residual, hidden, mlp_input);
}

// Every group's residual rows into mlp_input [N, hidden] over the ranks with the same attn_tp
// rank: fixed-size padded blocks (MaxLen) or exact counts (Exact).
void MpiStepComm::gather_reduced_rows(const float* local, int64_t hidden,
                                      std::vector<float>& mlp_input) {
  const int group = topology_.group_in_instance();
  const int64_t n_local = gather_.rows[static_cast<size_t>(group)];
  mlp_input.resize(static_cast<size_t>(gather_.mlp_rows * hidden));
  if (gather_.mode == PaddingMode::Exact) {
    std::vector<int64_t> counts;
    for (int64_t rows : gather_.rows) counts.push_back(rows * hidden);
    cross_dp_.all_gather_v(local, counts, mlp_input.data());
    return;
  }
  const int64_t block = gather_.max_rows * hidden;
  float* padded = take(padded_, block);
  float* all = take(gathered_, block * cross_dp_.size());
  std::copy_n(local, n_local * hidden, padded);
  std::fill(padded + n_local * hidden, padded + block, 0.0f);
  cross_dp_.all_gather(padded, block, all);
  for (size_t d = 0; d < gather_.rows.size(); ++d) {
    std::copy_n(all + static_cast<int64_t>(d) * block, gather_.rows[d] * hidden,
                mlp_input.data() + gather_.offsets[d] * hidden);
  }
}

void MpiStepComm::mlp_to_attention(const float* mlp_partial, float* residual, int64_t n_local,
                                   int64_t hidden) {
  const float* mine = group_sums(mlp_partial, hidden);
  for (int64_t i = 0; i < n_local * hidden; ++i) residual[i] += mine[i];
}

// Each group's rows at its offset of a zeroed buffer summed over tp (SumLen, Legacy: one
// all-reduce, only the group leader adding its rows), else the gather of MaxLen / Exact.
void MpiStepComm::gather_groups(const float* local, int64_t n_local, int64_t width,
                                std::vector<float>& all) {
  if (gather_.mode != PaddingMode::SumLen && gather_.mode != PaddingMode::Legacy) {
    gather_reduced_rows(local, width, all);
    return;
  }
  all.assign(static_cast<size_t>(gather_.mlp_rows * width), 0.0f);
  if (topology_.group_leader()) {
    const int64_t offset = gather_.offsets[static_cast<size_t>(topology_.group_in_instance())];
    std::copy_n(local, n_local * width, all.data() + offset * width);
  }
  tp_.all_reduce_sum(all.data(), gather_.mlp_rows * width);
}

void MpiStepComm::reduce_to_group(const float* partial, int64_t n_local, int64_t width,
                                  float* out) {
  std::copy_n(group_sums(partial, width), n_local * width, out);
}

// The MLP's partial rows summed over tp; returns this group's summed rows [n_local, hidden]
// (scratch: valid until the next exchange).
const float* MpiStepComm::group_sums(const float* mlp_partial, int64_t hidden) {
  const ScatterLayout& s = scatter_;
  if (s.mode != ScatterMode::AllReduce) return reduce_scatter_group_rows(mlp_partial, hidden);
  float* summed = take(summed_, s.buffer_rows * hidden);
  std::copy_n(mlp_partial, s.buffer_rows * hidden, summed);
  tp_.all_reduce_sum(summed, s.buffer_rows * hidden);
  return summed + s.group_start[static_cast<size_t>(topology_.group_in_instance())] * hidden;
}

// Reduce-scatter over tp (this rank gets its shard of its group's rows), then all-gather the
// shards over attn_tp (see plan_scatter). Returns the group's summed rows.
const float* MpiStepComm::reduce_scatter_group_rows(const float* mlp_partial, int64_t hidden) {
  const ScatterLayout& s = scatter_;
  const int group = topology_.group_in_instance(), P = attn_tp_.size();
  std::vector<int64_t> counts;  // values per tp rank
  for (int64_t rows : s.rank_rows) counts.push_back(rows * hidden);
  const std::vector<int64_t> group_counts(counts.begin() + group * P,
                                          counts.begin() + (group + 1) * P);
  float* shard = take(shard_, counts[static_cast<size_t>(tp_.rank())]);
  if (s.mode == ScatterMode::ReduceScatterBlock) {
    // The MLP ran on the groups' rows back to back; pad each group to its blocks.
    float* padded = take(padded_, s.buffer_rows * hidden);
    std::fill(padded, padded + s.buffer_rows * hidden, 0.0f);
    for (size_t d = 0; d < gather_.rows.size(); ++d) {
      std::copy_n(mlp_partial + gather_.offsets[d] * hidden, gather_.rows[d] * hidden,
                  padded + s.group_start[d] * hidden);
    }
    tp_.reduce_scatter(padded, counts.front(), shard);
  } else {
    tp_.reduce_scatter_v(mlp_partial, counts, shard);
  }
  if (P == 1) return shard;
  float* rows =
      take(gathered_, std::accumulate(group_counts.begin(), group_counts.end(), int64_t{0}));
  if (s.mode == ScatterMode::ReduceScatterBlock) {
    attn_tp_.all_gather(shard, counts.front(), rows);
  } else {
    attn_tp_.all_gather_v(shard, group_counts, rows);
  }
  return rows;
}

// The lm_head's vocabulary blocks are split over attn_tp (WeightKind::LmHead's rule), rank r
// holding shard_range(vocab, r, attn_tp) rows.
void MpiStepComm::gather_vocab(const float* logits_shard, int64_t rows, int64_t vocab,
                               float* logits) {
  const int P = attn_tp_.size();
  if (P == 1) {  // the shard is the whole vocabulary: one copy, not two through `blocks`
    std::copy_n(logits_shard, rows * vocab, logits);
    return;
  }
  std::vector<int64_t> counts(static_cast<size_t>(P));
  for (int r = 0; r < P; ++r)
    counts[static_cast<size_t>(r)] = rows * model::shard_range(vocab, r, P).size();
  float* blocks = take(vocab_blocks_, rows * vocab);
  attn_tp_.all_gather_v(logits_shard, counts, blocks);
  // blocks: [rank][rows][shard] -> logits: [rows][vocab]
  int64_t at = 0;
  for (int r = 0; r < P; ++r) {
    const model::Range range = model::shard_range(vocab, r, P);
    for (int64_t row = 0; row < rows; ++row, at += range.size()) {
      std::copy_n(blocks + at, range.size(), logits + row * vocab + range.begin);
    }
  }
}

}  // namespace mlaserve::parallel
