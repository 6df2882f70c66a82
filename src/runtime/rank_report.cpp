#include "runtime/rank_report.h"

#include <mpi.h>
#include <sys/resource.h>

#include "kernels/parallel.h"
#include "runtime/placement.h"

namespace mlaserve::runtime {

size_t peak_rss_bytes() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return static_cast<size_t>(usage.ru_maxrss) * 1024;  // Linux reports KiB
}

nlohmann::json rank_report(Worker& worker) {
  const parallel::Topology& t = worker.topology();
  nlohmann::json flops = nlohmann::json::object();
  for (const auto& [kind, count] : worker.model().flop_counts()) flops[kind] = count;
  nlohmann::json comm = nlohmann::json::object();
  for (size_t op = 0; op < static_cast<size_t>(parallel::CollectiveOp::Count); ++op) {
    comm[parallel::collective_name(static_cast<parallel::CollectiveOp>(op))] = {
        {"calls", worker.comm_stats().calls[op]},
        {"bytes_sent", worker.comm_stats().bytes_sent[op]}};
  }
  return {{"rank", t.world_rank},
          {"group", t.group()},
          {"attn_tp_rank", t.layout.attn_tp_rank},
          {"host", host_name()},
          {"numa_node", numa_node_of_cpu(first_affinity_cpu())},
          {"cores", affinity_cpus()},
          {"threads", kernels::parallel_threads()},
          {"weight_value_bytes", worker.model().weight_value_bytes()},
          {"resident_weight_bytes", worker.model().resident_weight_bytes()},
          {"peak_rss_bytes", peak_rss_bytes()},
          {"kv_capacity_tokens", worker.kv_capacity_tokens()},
          {"kv_cache_dtype", std::string(kv_dtype_name(worker.kv_dtype()))},
          {"steps", worker.stats().steps},
          {"padded_rows", worker.stats().padded_rows},
          {"flops", flops},
          {"collectives", comm}};
}

nlohmann::json gather_rank_reports(Worker& worker) {
  const std::string mine = rank_report(worker).dump();
  const int size = static_cast<int>(mine.size());
  const int world = worker.topology().world_size, rank = worker.topology().world_rank;
  std::vector<int> sizes(static_cast<size_t>(world)), displs(static_cast<size_t>(world), 0);
  MPI_Gather(&size, 1, MPI_INT, sizes.data(), 1, MPI_INT, 0, MPI_COMM_WORLD);
  for (size_t r = 1; r < sizes.size(); ++r) displs[r] = displs[r - 1] + sizes[r - 1];
  std::string all(rank == 0 ? static_cast<size_t>(displs.back() + sizes.back()) : 0, '\0');
  MPI_Gatherv(mine.data(), size, MPI_CHAR, all.data(), sizes.data(), displs.data(), MPI_CHAR, 0,
              MPI_COMM_WORLD);
  nlohmann::json reports = nlohmann::json::array();
  if (rank != 0) return reports;
  for (size_t r = 0; r < sizes.size(); ++r) {
    reports.push_back(nlohmann::json::parse(
        all.substr(static_cast<size_t>(displs[r]), static_cast<size_t>(sizes[r]))));
  }
  return reports;
}

}  // namespace mlaserve::runtime
