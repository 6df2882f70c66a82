// Typed MPI collectives over one communicator, with per-operation byte counters and an optional
// check that every rank entered the same collective with the same count (a mismatch becomes an
// error naming the layer instead of a hang). Each one runs under the watchdog's deadline
// (collective_watchdog.h).
#pragma once

#include <mpi.h>

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "parallel/collective_watchdog.h"

namespace mlaserve::parallel {

enum class CollectiveOp {
  AllReduce,
  AllGather,
  AllGatherV,
  ReduceScatter,
  ReduceScatterV,
  Broadcast,
  Count
};
const char* collective_name(CollectiveOp op);

struct CommStats {
  std::array<uint64_t, static_cast<size_t>(CollectiveOp::Count)> calls{};
  std::array<uint64_t, static_cast<size_t>(CollectiveOp::Count)> bytes_sent{};
};

class Collectives {
 public:
  Collectives() = default;
  Collectives(MPI_Comm comm, std::string name, CommStats* stats, bool check);

  int size() const { return size_; }
  int rank() const { return rank_; }
  MPI_Comm comm() const { return comm_; }
  void set_layer(int64_t layer) { layer_ = layer; }

  void all_reduce_sum(float* data, int64_t count);
  // recv holds size() blocks of `count` values each, in rank order.
  void all_gather(const float* send, int64_t count, float* recv);
  // recv holds the blocks of counts[r] values each, in rank order.
  void all_gather_v(const float* send, const std::vector<int64_t>& counts, float* recv);
  // Sums send [size() * count] over the ranks; rank r receives block r (`count` values).
  void reduce_scatter(const float* send, int64_t count, float* recv);
  // Sums send [Σ counts] over the ranks; rank r receives its counts[r] values, blocks in rank
  // order.
  void reduce_scatter_v(const float* send, const std::vector<int64_t>& counts, float* recv);
  void broadcast(void* data, int64_t bytes, int root);

  // Allocates the scratch the sums need for counts up to max_count (all_reduce_sum's count, the
  // whole send buffer of a reduce-scatter), so that steps reuse it instead of allocating.
  void reserve(int64_t max_count);
  size_t scratch_bytes() const { return parts_.capacity() * sizeof(float); }

 private:
  // Counts the call, runs the check, and returns the watchdog's wait for the collective itself.
  CollectiveWait enter(CollectiveOp op, int64_t count, int64_t bytes);
  void check_entry(CollectiveOp op, int64_t count);

  MPI_Comm comm_ = MPI_COMM_NULL;
  std::string name_;
  CommStats* stats_ = nullptr;
  bool check_ = false;
  int size_ = 1, rank_ = 0;
  int64_t layer_ = -1;
  std::vector<float> parts_;  // rank-ordered sums gather every rank's part here
};

}  // namespace mlaserve::parallel
