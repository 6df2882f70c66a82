#include "parallel/collectives.h"

#include <climits>
#include <cstdio>
#include <cstdlib>
#include <utility>

#include "core/error.h"
#include "core/scratch.h"
#include "kernels/ops.h"

namespace mlaserve::parallel {

const char* collective_name(CollectiveOp op) {
  static const char* names[] = {"all_reduce",     "all_gather",       "all_gather_v",
                                "reduce_scatter", "reduce_scatter_v", "broadcast"};
  return names[static_cast<size_t>(op)];
}

namespace {

int checked_int(int64_t v, const char* what) {
  if (v < 0 || v > INT_MAX) fail("MPI {} count {} exceeds the int range", what, v);
  return static_cast<int>(v);
}

// Per-rank counts as MPI ints, with their sum.
std::vector<int> checked_ints(const std::vector<int64_t>& counts, const char* what,
                              int64_t& total) {
  std::vector<int> ints(counts.size());
  total = 0;
  for (size_t r = 0; r < counts.size(); ++r) {
    ints[r] = checked_int(counts[r], what);
    total += counts[r];
  }
  checked_int(total, what);
  return ints;
}

// Test only (tests/collective_check_test.cpp): MLASERVE_TEST_SKEW_COLLECTIVE=R:L makes world
// rank R declare one value too many to the check at layer L, so a test can watch the check
// turn a mismatch into an error.
bool test_skews_count(int64_t layer) {
  static const auto skew = [] {
    const char* spec = std::getenv("MLASERVE_TEST_SKEW_COLLECTIVE");
    long long rank = -1, at = -1;
    if (spec == nullptr || std::sscanf(spec, "%lld:%lld", &rank, &at) != 2) rank = -1;
    return std::pair<long long, long long>{rank, at};
  }();
  if (skew.first < 0 || skew.second != layer) return false;
  int world_rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &world_rank);
  return world_rank == skew.first;
}

// Under deterministic kernels (ops.h) sums over more than two ranks are formed here, in rank
// order, from the ranks' exchanged parts: MPI's reductions choose their algorithm, and with it
// the order in which the ranks' values are added, by message size, so a token's sum would
// depend on how many tokens its step carries. (Two values add alike in either order.)
bool sums_in_rank_order(int size) {
  return size > 2 && kernels::deterministic_kernels();
}

// out[i] = ((parts[0][i] + parts[1][i]) + parts[2][i]) + ..., parts [size, count].
void rank_ordered_sum(const float* parts, int size, int64_t count, float* out) {
  for (int64_t i = 0; i < count; ++i) {
    float sum = parts[i];
    for (int r = 1; r < size; ++r) sum += parts[r * count + i];
    out[i] = sum;
  }
}

}  // namespace

Collectives::Collectives(MPI_Comm comm, std::string name, CommStats* stats, bool check)
    : comm_(comm), name_(std::move(name)), stats_(stats), check_(check) {
  MPI_Comm_size(comm_, &size_);
  MPI_Comm_rank(comm_, &rank_);
}

CollectiveWait Collectives::enter(CollectiveOp op, int64_t count, int64_t bytes) {
  stats_->calls[static_cast<size_t>(op)] += 1;
  stats_->bytes_sent[static_cast<size_t>(op)] += static_cast<uint64_t>(bytes);
  if (check_ && size_ > 1) check_entry(op, count);
  return CollectiveWait(collective_name(op), name_.c_str(), layer_);
}

void Collectives::check_entry(CollectiveOp op, int64_t count) {
  const CollectiveWait wait("the collective check", name_.c_str(), layer_);
  // Every rank shares (op, count, layer); any difference means the ranks disagree about the step.
  const int64_t mine[3] = {static_cast<int64_t>(op), count + (test_skews_count(layer_) ? 1 : 0),
                           layer_};
  std::vector<int64_t> all(static_cast<size_t>(3 * size_));
  MPI_Allgather(mine, 3, MPI_INT64_T, all.data(), 3, MPI_INT64_T, comm_);
  for (int r = 0; r < size_; ++r) {
    const int64_t* theirs = all.data() + 3 * r;
    if (theirs[0] != mine[0] || theirs[1] != mine[1] || theirs[2] != mine[2]) {
      fail(
          "collective mismatch on {} at layer {}: rank {} entered {} of {} values at layer {}, "
          "rank {} entered {} of {} values at layer {}",
          name_, layer_, rank_, collective_name(op), mine[1], layer_, r,
          collective_name(static_cast<CollectiveOp>(theirs[0])), theirs[1], theirs[2]);
    }
  }
}

void Collectives::reserve(int64_t max_count) {
  if (sums_in_rank_order(size_)) take(parts_, max_count * size_);
}

void Collectives::all_reduce_sum(float* data, int64_t count) {
  const CollectiveWait wait = enter(CollectiveOp::AllReduce, count, count * 4);
  if (size_ == 1) return;
  const int n = checked_int(count, "all_reduce");
  if (sums_in_rank_order(size_)) {
    float* all = take(parts_, size_ * count);
    MPI_Allgather(data, n, MPI_FLOAT, all, n, MPI_FLOAT, comm_);
    rank_ordered_sum(all, size_, count, data);
    return;
  }
  MPI_Allreduce(MPI_IN_PLACE, data, n, MPI_FLOAT, MPI_SUM, comm_);
}

void Collectives::all_gather(const float* send, int64_t count, float* recv) {
  const CollectiveWait wait = enter(CollectiveOp::AllGather, count, count * 4);
  const int n = checked_int(count, "all_gather");
  MPI_Allgather(send, n, MPI_FLOAT, recv, n, MPI_FLOAT, comm_);
}

void Collectives::all_gather_v(const float* send, const std::vector<int64_t>& counts, float* recv) {
  int64_t total = 0;
  const std::vector<int> ints = checked_ints(counts, "all_gather_v", total);
  std::vector<int> displs(counts.size(), 0);
  for (size_t r = 1; r < counts.size(); ++r) displs[r] = displs[r - 1] + ints[r - 1];
  const CollectiveWait wait =
      enter(CollectiveOp::AllGatherV, total, counts[static_cast<size_t>(rank_)] * 4);
  MPI_Allgatherv(send, ints[static_cast<size_t>(rank_)], MPI_FLOAT, recv, ints.data(),
                 displs.data(), MPI_FLOAT, comm_);
}

// A reduce-scatter's bytes are the whole buffer this rank contributes to the sum, as for
// all_reduce.
void Collectives::reduce_scatter(const float* send, int64_t count, float* recv) {
  const CollectiveWait wait = enter(CollectiveOp::ReduceScatter, count, count * size_ * 4);
  const int n = checked_int(count, "reduce_scatter");
  if (sums_in_rank_order(size_)) {
    float* blocks = take(parts_, size_ * count);  // every rank's block `rank_`
    MPI_Alltoall(send, n, MPI_FLOAT, blocks, n, MPI_FLOAT, comm_);
    rank_ordered_sum(blocks, size_, count, recv);
    return;
  }
  MPI_Reduce_scatter_block(send, recv, n, MPI_FLOAT, MPI_SUM, comm_);
}

void Collectives::reduce_scatter_v(const float* send, const std::vector<int64_t>& counts,
                                   float* recv) {
  int64_t total = 0;
  const std::vector<int> ints = checked_ints(counts, "reduce_scatter_v", total);
  const CollectiveWait wait = enter(CollectiveOp::ReduceScatterV, total, total * 4);
  if (sums_in_rank_order(size_)) {
    const int mine = ints[static_cast<size_t>(rank_)];
    std::vector<int> send_displs(ints.size(), 0), recv_counts(ints.size(), mine),
        recv_displs(ints.size(), 0);
    for (size_t r = 1; r < ints.size(); ++r) {
      send_displs[r] = send_displs[r - 1] + ints[r - 1];
      recv_displs[r] = recv_displs[r - 1] + mine;
    }
    float* blocks = take(parts_, static_cast<int64_t>(size_) * mine);
    MPI_Alltoallv(send, ints.data(), send_displs.data(), MPI_FLOAT, blocks, recv_counts.data(),
                  recv_displs.data(), MPI_FLOAT, comm_);
    rank_ordered_sum(blocks, size_, mine, recv);
    return;
  }
  MPI_Reduce_scatter(send, recv, ints.data(), MPI_FLOAT, MPI_SUM, comm_);
}

void Collectives::broadcast(void* data, int64_t bytes, int root) {
  const CollectiveWait wait = enter(CollectiveOp::Broadcast, bytes, rank_ == root ? bytes : 0);
  if (size_ == 1) return;
  MPI_Bcast(data, checked_int(bytes, "broadcast"), MPI_BYTE, root, comm_);
}

}  // namespace mlaserve::parallel
