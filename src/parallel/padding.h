// How the attention -> MLP gather lays out the DP groups' rows, and how the MLP -> attention
// scatter hands them back. One pure function of the step's per-group token counts, so every rank
// picks the same mode.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace mlaserve::parallel {

enum class PaddingMode {
  SumLen,  // zeroed [N, H] buffer, each group writes its rows, one all-reduce (o_proj reduce +
           // gather)
  MaxLen,  // each group padded to the max count, fixed-size all-gather, then compacted for the MLP
  Exact,   // MPI_Allgatherv with each group's exact count: no padding anywhere
  Legacy,  // pre-#4390: every group padded to the global max and the MLP runs max * dp rows
};
enum class PaddingPolicy { Auto, SumLen, MaxLen, Exact, Legacy };

PaddingPolicy parse_padding_policy(const std::string& name);

struct GatherLayout {
  PaddingMode mode = PaddingMode::SumLen;
  std::vector<int64_t> rows;     // real rows per group
  std::vector<int64_t> offsets;  // where each group's rows start in the MLP batch
  int64_t real_rows = 0;         // Σ rows
  int64_t max_rows = 0;
  int64_t mlp_rows = 0;  // rows the MLP computes (Σ rows, or max * groups in Legacy)
  int64_t padded_rows() const { return mlp_rows - real_rows; }
};

// Auto (SGLang's rule since its 2025 DP-attention rework): SumLen when any group extends;
// otherwise MaxLen when the load is balanced enough that the padded all-gather moves less than an
// all-reduce, which costs about twice its buffer (2·Σn >= max·dp), else SumLen.
GatherLayout plan_gather(const std::vector<int64_t>& group_rows, bool any_extend,
                         PaddingPolicy policy);

// The MLP -> attention step: every tp rank holds partial sums of all the MLP rows, and every rank
// of group d needs the summed rows of group d. A reduce-scatter hands each element to exactly one
// rank, so by itself it is the whole step only when attn_tp == 1. For attn_tp > 1 it sums over tp
// into one row shard per tp rank (tp ranks are DP-major, rank = d * attn_tp + a, so group d's rows
// land on its own ranks), and an all-gather over attn_tp rebuilds the group's rows on each of them
// (SGLang's dp_reduce_scatter_tensor). The other order, a reduce-scatter over the cross-DP ranks
// and then an all-reduce over attn_tp, moves the same bytes in as many rounds; the first is kept
// because each summed row is computed on one rank and copied, so the ranks of a group hold
// bit-identical residuals by construction.
enum class ScatterMode {
  AllReduce,           // all-reduce the [mlp_rows, H] buffer over tp, keep the group's slice
  ReduceScatterBlock,  // rows padded to equal blocks per tp rank: MPI_Reduce_scatter_block
  ReduceScatterExact,  // the groups' exact rows split over their ranks: MPI_Reduce_scatter
};

struct ScatterLayout {
  ScatterMode mode = ScatterMode::AllReduce;
  int64_t buffer_rows = 0;  // rows of the buffer that is reduced (padded in ReduceScatterBlock)
  std::vector<int64_t> group_start;  // where group d's rows start in that buffer
  std::vector<int64_t> rank_rows;    // ReduceScatter*: rows tp rank d * attn_tp + a receives
};

// SumLen and Legacy keep the all-reduce (their gather already made one buffer for everybody);
// MaxLen reduce-scatters blocks of ceil(max / attn_tp) rows, Exact each group's shard_range rows.
// A single group (pure TP, replicas) always all-reduces: a reduce-scatter then an all-gather over
// the same ranks is an all-reduce in two calls.
ScatterLayout plan_scatter(const GatherLayout& gather, int attn_tp_size);

}  // namespace mlaserve::parallel
