#include "runtime/weight_packing.h"

#include <mpi.h>
#include <spdlog/spdlog.h>

#include <array>

#include "kernels/ops.h"
#include "model/footprint.h"
#include "model/load_progress.h"
#include "runtime/launch.h"
#include "runtime/placement.h"

namespace mlaserve::runtime {

bool packing_fits(double values, double other, double packed, double available) {
  return available < 0 || values + other + packed <= kPackingMemoryShare * available;
}

void choose_weight_packing(const std::filesystem::path& model_dir, const model::ModelConfig& cfg,
                           const model::WeightFormat& format, const model::RankLayout& layout,
                           bool with_mtp, int64_t other_bytes) {
  kernels::use_weight_packing(true);  // rank_weights counts the copies packing would make
  const model::RankWeights w =
      model::rank_weights(cfg, layout, model::resolve_weight_format(format, cfg),
                          model::stored_fp8_of(model_dir), with_mtp);
  std::array<double, 3> host{static_cast<double>(w.values()), static_cast<double>(other_bytes),
                             static_cast<double>(w.packed)};
  const HostRanks ranks;
  MPI_Allreduce(MPI_IN_PLACE, host.data(), 3, MPI_DOUBLE, MPI_SUM, ranks.comm());
  const double available = model::mem_available_bytes();
  int pack = packing_fits(host[0], host[1], host[2], available) ? 1 : 0;
  MPI_Bcast(&pack, 1, MPI_INT, 0, ranks.comm());  // one MemAvailable reading per host
  kernels::use_weight_packing(pack != 0);
  if (ranks.rank() != 0 || host[2] == 0) return;
  const double gb = 1e9;
  spdlog::info(
      "weight packing: {} for host {} (its ranks hold {:.2f} GB of weights and {:.2f} GB of KV "
      "cache, oneDNN's packed copies {:.2f} GB more, against {} of MemAvailable){}",
      pack ? "on" : "off", host_name(), host[0] / gb, host[1] / gb, host[2] / gb,
      available < 0 ? std::string("an unknown amount") : fmt::format("{:.2f} GB", available / gb),
      pack ? ""
           : ": prefill GEMMs read the row-major weights (--weight-packing on forces the copies)");
}

}  // namespace mlaserve::runtime
