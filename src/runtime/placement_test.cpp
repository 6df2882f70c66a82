// The local launch's placement decision on described hosts (this machine has one NUMA node, so
// the multi-socket cases cannot run for real here).
#include "runtime/placement.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>

namespace mlaserve::runtime {
namespace {

bool has_args(const LocalPlacement& p, const std::vector<std::string>& args) {
  return std::search(p.mpirun_args.begin(), p.mpirun_args.end(), args.begin(), args.end()) !=
         p.mpirun_args.end();
}

// What every placement must hold: ranks spread evenly over the nodes, and the threads of a
// node's ranks use its cores without oversubscribing them (unless there are more ranks than
// cores, one thread each).
void check_invariants(const HostTopology& host, int ranks, const LocalPlacement& p) {
  ASSERT_EQ(p.node_of_rank.size(), static_cast<size_t>(ranks));
  ASSERT_EQ(p.threads_of_rank.size(), static_cast<size_t>(ranks));
  std::map<int, int> ranks_on, threads_on;
  for (int r = 0; r < ranks; ++r) {
    ranks_on[p.node_of_rank[static_cast<size_t>(r)]] += 1;
    threads_on[p.node_of_rank[static_cast<size_t>(r)]] += p.threads_of_rank[static_cast<size_t>(r)];
  }
  const int nodes = p.bind_to_numa ? static_cast<int>(host.cores_per_node.size()) : 1;
  for (const auto& [node, count] : ranks_on) {
    SCOPED_TRACE("node " + std::to_string(node));
    ASSERT_LT(node, nodes);
    EXPECT_LE(count, (ranks + nodes - 1) / nodes);
    EXPECT_GE(count, ranks / nodes);
    const int cores =
        p.bind_to_numa ? host.cores_per_node[static_cast<size_t>(node)] : host.cores();
    EXPECT_LE(threads_on[node], std::max(cores, count));
    EXPECT_GT(threads_on[node], cores - count);
  }
}

TEST(Placement, TwoSocketsGetOneRankPerNodeWithTheNodesCores) {
  const HostTopology host{{8, 8}};
  const LocalPlacement p = plan_local_placement(host, 2);
  check_invariants(host, 2, p);
  EXPECT_TRUE(p.bind_to_numa);
  EXPECT_NE(p.node_of_rank[0], p.node_of_rank[1]);
  EXPECT_EQ(p.threads_of_rank, (std::vector<int>{8, 8}));
  EXPECT_TRUE(has_args(p, {"--map-by", "numa", "--bind-to", "numa"}));
}

TEST(Placement, NodesOfUnequalSizeAndMoreRanksThanNodes) {
  for (const HostTopology& host : {HostTopology{{8, 8}}, HostTopology{{12, 4}},
                                   HostTopology{{4, 4, 4, 4}}, HostTopology{{6, 6, 6}}}) {
    for (int ranks : {1, 2, 3, 4, 5, 8, 12}) {
      SCOPED_TRACE(std::to_string(host.cores_per_node.size()) + " nodes, " + std::to_string(ranks) +
                   " ranks");
      check_invariants(host, ranks, plan_local_placement(host, ranks));
    }
  }
}

TEST(Placement, OneNodeLeavesRanksUnboundSharingTheCores) {
  const HostTopology host{{16}};
  const LocalPlacement p = plan_local_placement(host, 4);
  check_invariants(host, 4, p);
  EXPECT_FALSE(p.bind_to_numa);
  EXPECT_TRUE(has_args(p, {"--bind-to", "none"}));
  EXPECT_FALSE(has_args(p, {"--map-by", "numa"}));
}

TEST(Placement, MoreRanksThanANodesCoresAllowsTheOverload) {
  const HostTopology host{{2, 2}};
  const LocalPlacement p = plan_local_placement(host, 8);
  check_invariants(host, 8, p);
  EXPECT_TRUE(has_args(p, {"--bind-to", "numa:overload-allowed"}));
  EXPECT_TRUE(has_args(p, {"--oversubscribe"}));
}

TEST(Placement, ThisMachinesNodesHoldItsCores) {
  const HostTopology host = read_host_topology();
  ASSERT_FALSE(host.cores_per_node.empty());
  EXPECT_GE(host.cores(), affinity_cpus());
  EXPECT_GE(numa_node_of_cpu(first_affinity_cpu()), 0);
}

}  // namespace
}  // namespace mlaserve::runtime
