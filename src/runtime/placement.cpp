#include "runtime/placement.h"

#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <numeric>
#include <sstream>
#include <thread>

namespace mlaserve::runtime {

namespace {

// "0-3,8-11" -> the CPU numbers it lists.
std::vector<int> parse_cpu_list(const std::string& text) {
  std::vector<int> cpus;
  std::stringstream in(text);
  std::string part;
  while (std::getline(in, part, ',')) {
    if (part.empty() || part == "\n") continue;
    int first = 0, last = 0;
    const size_t dash = part.find('-');
    first = std::stoi(part.substr(0, dash));
    last = dash == std::string::npos ? first : std::stoi(part.substr(dash + 1));
    for (int c = first; c <= last; ++c) cpus.push_back(c);
  }
  return cpus;
}

std::string read_line(const std::filesystem::path& path) {
  std::ifstream in(path);
  std::string line;
  std::getline(in, line);
  return line;
}

// Node number -> its CPUs, for the nodes that have CPUs.
std::vector<std::pair<int, std::vector<int>>> nodes_with_cpus() {
  std::vector<std::pair<int, std::vector<int>>> nodes;
  const std::filesystem::path root = "/sys/devices/system/node";
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(root, ec)) {
    const std::string name = entry.path().filename().string();
    if (name.rfind("node", 0) != 0 || name.size() == 4 ||
        !std::all_of(name.begin() + 4, name.end(), ::isdigit))
      continue;
    std::vector<int> cpus = parse_cpu_list(read_line(entry.path() / "cpulist"));
    if (!cpus.empty()) nodes.emplace_back(std::stoi(name.substr(4)), std::move(cpus));
  }
  std::sort(nodes.begin(), nodes.end());
  return nodes;
}

}  // namespace

int HostTopology::cores() const {
  return std::accumulate(cores_per_node.begin(), cores_per_node.end(), 0);
}

HostTopology read_host_topology() {
  HostTopology host;
  for (const auto& [node, cpus] : nodes_with_cpus())
    host.cores_per_node.push_back(static_cast<int>(cpus.size()));
  if (host.cores_per_node.empty())
    host.cores_per_node.push_back(
        static_cast<int>(std::max(1u, std::thread::hardware_concurrency())));
  return host;
}

LocalPlacement plan_local_placement(const HostTopology& host, int ranks) {
  LocalPlacement p;
  const int nodes = static_cast<int>(host.cores_per_node.size());
  p.bind_to_numa = nodes > 1;
  // Open MPI's --map-by numa deals ranks to the nodes round robin: rank r on node r % nodes.
  std::vector<int> ranks_on_node(static_cast<size_t>(nodes), 0);
  for (int r = 0; r < ranks; ++r) {
    const int node = p.bind_to_numa ? r % nodes : 0;
    p.node_of_rank.push_back(node);
    ranks_on_node[static_cast<size_t>(node)] += 1;
  }
  for (int r = 0; r < ranks; ++r) {
    const auto node = static_cast<size_t>(p.node_of_rank[static_cast<size_t>(r)]);
    const int cores = p.bind_to_numa ? host.cores_per_node[node] : host.cores();
    p.threads_of_rank.push_back(threads_per_rank(cores, ranks_on_node[node]));
  }
  // More ranks than cores: Open MPI refuses to bind them unless told the overload is allowed,
  // and to start them without --oversubscribe; they yield when idle (mpi_yield_when_idle), so
  // they stay usable, if slow.
  bool overloaded = false;
  for (size_t n = 0; n < ranks_on_node.size(); ++n)
    overloaded = overloaded || ranks_on_node[n] > host.cores_per_node[n];
  if (p.bind_to_numa) {
    p.mpirun_args = {"--map-by", "numa", "--bind-to",
                     overloaded ? "numa:overload-allowed" : "numa"};
  } else {
    p.mpirun_args = {"--bind-to", "none"};
  }
  p.mpirun_args.push_back("--oversubscribe");
  return p;
}

int threads_per_rank(int cores_in_affinity, int ranks_sharing_them) {
  return std::max(1, cores_in_affinity / std::max(1, ranks_sharing_them));
}

int affinity_cpus() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof(set), &set) != 0)
    return static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  return CPU_COUNT(&set);
}

int first_affinity_cpu() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof(set), &set) != 0) return 0;
  int first = 0;
  while (first < CPU_SETSIZE - 1 && !CPU_ISSET(first, &set)) ++first;
  return first;
}

int numa_node_of_cpu(int cpu) {
  for (const auto& [node, cpus] : nodes_with_cpus()) {
    if (std::find(cpus.begin(), cpus.end(), cpu) != cpus.end()) return node;
  }
  return -1;
}

std::string host_name() {
  char name[256] = {};
  gethostname(name, sizeof(name) - 1);
  return name;
}

}  // namespace mlaserve::runtime
