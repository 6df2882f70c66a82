#include "runtime/launch.h"

#include <mpi.h>
#include <omp.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>
#include <thread>
#include <utility>

#include "core/error.h"

namespace mlaserve::runtime {

namespace {

bool started_by_mpirun() {
  return std::getenv("OMPI_COMM_WORLD_SIZE") != nullptr || std::getenv("PMI_SIZE");
}

// Replaces this process with `file` (searched in PATH unless it holds a '/') run on `argv`;
// returns only when that fails.
void exec_replacing_this_process(const std::string& file, std::vector<std::string> argv) {
  std::vector<char*> c_argv;
  for (auto& a : argv) c_argv.push_back(a.data());
  c_argv.push_back(nullptr);
  std::fflush(nullptr);
  execvp(file.c_str(), c_argv.data());
}

// OpenMP reads OMP_WAIT_POLICY when the library loads, so a single rank that wants passive
// waiting (oneDNN's OpenMP threads must not spin against the kernels' own pool) re-executes
// itself once with it set; a policy the user set is kept.
void reexec_with_passive_openmp(const std::vector<std::string>& args) {
  if (std::getenv("OMP_WAIT_POLICY") != nullptr || args.empty()) return;
  setenv("OMP_WAIT_POLICY", "passive", 0);
  exec_replacing_this_process("/proc/self/exe",
                              args);  // on failure, run on with the default policy
}

}  // namespace

void relaunch_under_mpirun_if_needed(int ranks, const std::vector<std::string>& args) {
  if (started_by_mpirun()) return;
  if (ranks <= 1) return reexec_with_passive_openmp(args);
  // Root is refused by Open MPI unless both variables are set; oversubscription and yielding
  // keep more ranks than cores usable (busy-polling oversubscribed ranks is 1000x slower).
  setenv("OMPI_ALLOW_RUN_AS_ROOT", "1", 1);
  setenv("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1", 1);
  setenv("OMP_WAIT_POLICY", "passive", 0);

  std::vector<std::string> argv = {"mpirun",
                                   "-np",
                                   std::to_string(ranks),
                                   "--oversubscribe",
                                   "--bind-to",
                                   "none",
                                   "--mca",
                                   "mpi_yield_when_idle",
                                   "1",
                                   "--mca",
                                   "btl",
                                   "self,vader",
                                   std::filesystem::read_symlink("/proc/self/exe").string()};
  argv.insert(argv.end(), args.begin() + 1, args.end());
  exec_replacing_this_process("mpirun", std::move(argv));
  fail("cannot start mpirun for {} ranks: {} (is openmpi-bin installed?)", ranks,
       std::strerror(errno));
}

namespace {
bool g_mpi_active = false;
std::vector<std::string> g_command_line;

// The ranks on one host share its cores: unless OMP_NUM_THREADS says otherwise, each rank's
// kernels and oneDNN use cores / ranks on this host. Counted after MPI_Init, so it holds alike
// under our own mpirun and an external (multi-host) one.
void set_threads_per_rank() {
  if (std::getenv("OMP_NUM_THREADS") != nullptr) return;
  MPI_Comm host;
  MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &host);
  int ranks_on_host = 1;
  MPI_Comm_size(host, &ranks_on_host);
  MPI_Comm_free(&host);
  const int cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  omp_set_num_threads(std::max(1, cores / ranks_on_host));
}
}  // namespace

void set_command_line(int argc, char** argv) {
  g_command_line.assign(argv, argv + argc);
}

void run_ranks(int ranks, const std::function<void(const MpiSession&)>& body) {
  relaunch_under_mpirun_if_needed(ranks, g_command_line);
  MpiSession mpi;
  set_threads_per_rank();
  try {
    body(mpi);
  } catch (const Error& e) {
    abort_job(std::string("error: ") + e.what(), 1);
  } catch (const std::exception& e) {
    abort_job(std::string("internal error: ") + e.what(), 2);
  }
}

MpiSession::MpiSession() {
  int provided = 0;
  MPI_Init_thread(nullptr, nullptr, MPI_THREAD_FUNNELED, &provided);
  g_mpi_active = true;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank_);
  MPI_Comm_size(MPI_COMM_WORLD, &size_);
}

MpiSession::~MpiSession() {
  g_mpi_active = false;
  MPI_Finalize();
}

bool mpi_active() {
  return g_mpi_active;
}

void abort_job(const std::string& message, int exit_code) {
  int rank = 0, size = 1;
  if (g_mpi_active) {
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
  }
  if (size > 1) {
    std::fprintf(stderr, "mlaserve: rank %d: %s\n", rank, message.c_str());
  } else {
    std::fprintf(stderr, "mlaserve: %s\n", message.c_str());
  }
  std::fflush(stderr);
  if (size > 1) MPI_Abort(MPI_COMM_WORLD, exit_code);
  std::exit(exit_code);
}

}  // namespace mlaserve::runtime
