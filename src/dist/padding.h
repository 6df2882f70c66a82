// How the attention -> MLP gather lays out the DP groups' rows (research B.4, C.3). One pure
// function of the step's per-group token counts, so every rank picks the same mode.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace mlaserve::dist {

enum class PaddingMode {
  SumLen,  // zeroed [N, H] buffer, each group writes its rows, one all-reduce (o_proj reduce + gather)
  MaxLen,  // each group padded to the max count, fixed-size all-gather, then compacted for the MLP
  Exact,   // MPI_Allgatherv with each group's exact count: no padding anywhere
  Legacy,  // pre-#4390: every group padded to the global max and the MLP runs max * dp rows
};
enum class PaddingPolicy { Auto, SumLen, MaxLen, Exact, Legacy };

PaddingPolicy parse_padding_policy(const std::string& name);
const char* padding_mode_name(PaddingMode mode);

struct GatherLayout {
  PaddingMode mode = PaddingMode::SumLen;
  std::vector<int64_t> rows;     // real rows per group
  std::vector<int64_t> offsets;  // where each group's rows start in the MLP batch
  int64_t real_rows = 0;         // Σ rows
  int64_t max_rows = 0;
  int64_t mlp_rows = 0;          // rows the MLP computes (Σ rows, or max * groups in Legacy)
  int64_t padded_rows() const { return mlp_rows - real_rows; }
};

// Auto follows research C.3: SumLen when any group extends; otherwise MaxLen when the load is
// balanced enough that the padded all-gather moves less than an all-reduce (2·Σn >= max·dp),
// else SumLen.
GatherLayout plan_gather(const std::vector<int64_t>& group_rows, bool any_extend, PaddingPolicy policy);

}  // namespace mlaserve::dist
