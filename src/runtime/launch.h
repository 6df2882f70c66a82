// Starting the ranks. From a plain shell, a command that needs N ranks re-executes itself under
// `mpirun -np N` on this host (allowed to run as root, oversubscribed, yielding when idle); under
// an external mpirun it uses the world it was given (multi-host).
#pragma once

#include <mpi.h>

#include <functional>
#include <string>
#include <vector>

#include "parallel/collective_watchdog.h"

namespace mlaserve::runtime {

// Re-execs this process under mpirun when `ranks` > 1 and we were not started by mpirun (one rank
// per NUMA node on a multi-socket host, placement.h). A single rank, and each rank of an external
// mpirun, re-execs itself once with OMP_WAIT_POLICY=passive unless the variable is set. Returns
// when no (further) re-exec is needed.
void relaunch_under_mpirun_if_needed(int ranks, const std::vector<std::string>& args);

// MPI for the lifetime of the object (MPI_THREAD_FUNNELED: only the main thread calls MPI).
class MpiSession {
 public:
  MpiSession();
  ~MpiSession();
  MpiSession(const MpiSession&) = delete;
  MpiSession& operator=(const MpiSession&) = delete;
  int rank() const { return rank_; }
  int size() const { return size_; }

 private:
  int rank_ = 0, size_ = 1;
};

// The ranks of this process's host (MPI_COMM_TYPE_SHARED) for the lifetime of the object: they
// share the host's cores and memory, so they decide together (threads per rank, the GEMM paths,
// weight packing), rank 0 of them for all where a measurement is involved.
class HostRanks {
 public:
  HostRanks();
  ~HostRanks();
  HostRanks(const HostRanks&) = delete;
  HostRanks& operator=(const HostRanks&) = delete;
  MPI_Comm comm() const { return comm_; }
  int rank() const { return rank_; }

 private:
  MPI_Comm comm_ = MPI_COMM_NULL;
  int rank_ = 0;
};

// The process's command line, recorded by main() so a relaunch can repeat it.
void set_command_line(int argc, char** argv);

// Runs `body` on every rank of a job of `ranks` ranks: relaunches under mpirun if needed, starts
// MPI and, with more than one rank, the collective watchdog; turns any error on any rank into
// abort_job() (never a hang).
void run_ranks(int ranks, const parallel::WatchdogOptions& watchdog,
               const std::function<void(const MpiSession&)>& body);

// True once MPI_Init has run in this process and not yet finalized.
bool mpi_active();

// Runs in abort_job before the job ends, on whichever thread failed (the collective watchdog's
// included): serve's rank 0 answers its pending HTTP requests with the error. nullptr clears it.
void set_job_failure_hook(std::function<void(const std::string& message)> hook);

// Ends the whole job from any rank: prints "rank R: message", runs the failure hook and calls
// MPI_Abort, so a rank that fails takes the others down within seconds instead of leaving them
// blocked in a collective. Should the hook and MPI_Abort not end this process within 5 s (the
// daemon of an unreachable host never answers), it exits anyway.
[[noreturn]] void abort_job(const std::string& message, int exit_code);

}  // namespace mlaserve::runtime
