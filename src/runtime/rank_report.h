// Per-rank counters (placement: host, NUMA node, cores and kernel threads; resident weights, FLOPs
// per layer kind, bytes per collective, padded rows), gathered to rank 0 as JSON for tests,
// benchmarks and logs.
#pragma once

#include <nlohmann/json.hpp>

#include "runtime/worker.h"

namespace mlaserve::runtime {

// The most memory this process has held resident so far (getrusage's maxrss), in bytes.
size_t peak_rss_bytes();

nlohmann::json rank_report(Worker& worker);

// Collective over the world: every rank's report, in rank order, on rank 0 (empty elsewhere).
nlohmann::json gather_rank_reports(Worker& worker);

}  // namespace mlaserve::runtime
