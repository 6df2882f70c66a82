// Where the ranks of a local launch run. On a host with several NUMA nodes each rank gets a node
// of its own (round robin when there are more ranks than nodes), bound to it, so its weights
// and KV cache stay in the node's memory; its kernel threads are the node's cores shared by the
// ranks on that node. A single-node host keeps the ranks unbound.
#pragma once

#include <string>
#include <vector>

namespace mlaserve::runtime {

// A host as the decision sees it: the cores of each NUMA node.
struct HostTopology {
  std::vector<int> cores_per_node;
  int cores() const;
};

// This machine's nodes from /sys/devices/system/node (one node of all cores when absent).
HostTopology read_host_topology();

struct LocalPlacement {
  bool bind_to_numa = false;
  std::vector<int> node_of_rank;         // NUMA node of each rank (0 when unbound)
  std::vector<int> threads_of_rank;      // kernel threads of each rank
  std::vector<std::string> mpirun_args;  // mapping and binding options for mpirun
};

LocalPlacement plan_local_placement(const HostTopology& host, int ranks);

// The kernel threads of one rank: the cores it may run on, shared by the ranks of its host that
// are bound alike (all of them when unbound).
int threads_per_rank(int cores_in_affinity, int ranks_sharing_them);

// This process: how many CPUs it may run on and the first of them; a CPU's NUMA node (-1 if
// unknown).
int affinity_cpus();
int first_affinity_cpu();
int numa_node_of_cpu(int cpu);
std::string host_name();

}  // namespace mlaserve::runtime
