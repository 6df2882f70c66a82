// Starting the ranks. From a plain shell, a command that needs N ranks re-executes itself under
// `mpirun -np N` on this host (allowed to run as root, oversubscribed, yielding when idle); under
// an external mpirun it uses the world it was given (multi-host).
#pragma once

#include <functional>
#include <string>
#include <vector>

namespace mlaserve::runtime {

// Re-execs this process under mpirun when `ranks` > 1 and we were not started by mpirun. A single
// rank re-execs itself once with OMP_WAIT_POLICY=passive unless the variable is set. Returns
// (without re-exec) when already inside an MPI job or when no re-exec is needed.
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

// The process's command line, recorded by main() so a relaunch can repeat it.
void set_command_line(int argc, char** argv);

// Runs `body` on every rank of a job of `ranks` ranks: relaunches under mpirun if needed, starts
// MPI, and turns any error on any rank into abort_job() (never a hang).
void run_ranks(int ranks, const std::function<void(const MpiSession&)>& body);

// True once MPI_Init has run in this process and not yet finalized.
bool mpi_active();

// Ends the whole job from any rank: prints "rank R: message" and calls MPI_Abort, so a rank that
// fails takes the others down within seconds instead of leaving them blocked in a collective.
[[noreturn]] void abort_job(const std::string& message, int exit_code);

}  // namespace mlaserve::runtime
