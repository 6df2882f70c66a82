#include "runtime/launch.h"

#include <mpi.h>
#include <omp.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <mutex>
#include <string>
#include <thread>
#include <utility>

#include "core/error.h"
#include "runtime/gemm_choice.h"
#include "runtime/placement.h"

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
  // Under an external mpirun (multi-host) each rank re-execs itself once, before MPI_Init, to
  // get the passive policy a local launch passes down; the exec keeps the pid and environment
  // the launching daemon knows it by.
  if (started_by_mpirun() || ranks <= 1) return reexec_with_passive_openmp(args);
  // Root is refused by Open MPI unless both variables are set.
  setenv("OMPI_ALLOW_RUN_AS_ROOT", "1", 1);
  setenv("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1", 1);
  setenv("OMP_WAIT_POLICY", "passive", 0);

  std::vector<std::string> argv = {"mpirun", "-np", std::to_string(ranks)};
  const LocalPlacement placement = plan_local_placement(read_host_topology(), ranks);
  argv.insert(argv.end(), placement.mpirun_args.begin(), placement.mpirun_args.end());
  // mpi_yield_when_idle: ranks waiting in MPI yield the core (busy-polling oversubscribed ranks
  // is 1000x slower). btl self,vader: one host, shared memory. rtc_hwloc_vmhole none: Debian's
  // Open MPI 4.1.4 daemon can crash placing its shared hwloc topology in the biggest hole of
  // its address space; none skips that shared copy.
  const std::pair<const char*, const char*> mca_settings[] = {
      {"mpi_yield_when_idle", "1"}, {"btl", "self,vader"}, {"rtc_hwloc_vmhole", "none"}};
  for (const auto& [name, value] : mca_settings) argv.insert(argv.end(), {"--mca", name, value});
  argv.push_back(std::filesystem::read_symlink("/proc/self/exe").string());
  argv.insert(argv.end(), args.begin() + 1, args.end());
  exec_replacing_this_process("mpirun", std::move(argv));
  fail("cannot start mpirun for {} ranks: {} (is openmpi-bin installed?)", ranks,
       std::strerror(errno));
}

namespace {
bool g_mpi_active = false;
std::vector<std::string> g_command_line;
std::mutex g_failure_hook_mutex;
std::function<void(const std::string&)> g_failure_hook;

// The failure hook and MPI_Abort together get this long: MPI_Abort blocks when the daemon of an
// unreachable host cannot be told.
constexpr std::chrono::seconds kAbortGrace{5};

// Ends this process after `grace` whatever the thread that called it is doing.
void exit_after(std::chrono::seconds grace, int exit_code) {
  std::thread([grace, exit_code] {
    std::this_thread::sleep_for(grace);
    std::fputs("mlaserve: the job did not end in time after a failure; exiting\n", stderr);
    std::fflush(stderr);
    _exit(exit_code);
  }).detach();
}

// The ranks on one host share its cores: unless OMP_NUM_THREADS says otherwise, each rank's
// kernels and oneDNN use the cores it may run on (its NUMA node when bound, else the host)
// divided by the ranks of this host bound alike. Counted after MPI_Init, so it holds alike under
// our own mpirun and an external (multi-host) one.
void set_threads_per_rank() {
  if (std::getenv("OMP_NUM_THREADS") != nullptr) return;
  const HostRanks host;
  MPI_Comm alike;
  MPI_Comm_split(host.comm(), first_affinity_cpu(), 0, &alike);
  int sharing = 1;
  MPI_Comm_size(alike, &sharing);
  MPI_Comm_free(&alike);
  omp_set_num_threads(threads_per_rank(affinity_cpus(), sharing));
}
// One line per rank: where it runs, with how many cores and threads.
void log_placement(const MpiSession& mpi) {
  spdlog::info("rank {} of {} on host {}, NUMA node {}, {} cores, {} threads", mpi.rank(),
               mpi.size(), host_name(), numa_node_of_cpu(first_affinity_cpu()), affinity_cpus(),
               omp_get_max_threads());
}
}  // namespace

HostRanks::HostRanks() {
  MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &comm_);
  MPI_Comm_rank(comm_, &rank_);
}

HostRanks::~HostRanks() {
  MPI_Comm_free(&comm_);
}

void set_command_line(int argc, char** argv) {
  g_command_line.assign(argv, argv + argc);
}

void run_ranks(int ranks, const parallel::WatchdogOptions& watchdog,
               const std::function<void(const MpiSession&)>& body) {
  relaunch_under_mpirun_if_needed(ranks, g_command_line);
  MpiSession mpi;
  set_threads_per_rank();
  if (mpi.size() > 1) {
    parallel::start_watchdog(watchdog, mpi.rank(), host_name(),
                             [](const std::string& message) { abort_job(message, 1); });
    log_placement(mpi);
  }
  try {
    choose_gemm_paths();
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

void set_job_failure_hook(std::function<void(const std::string& message)> hook) {
  std::lock_guard lock(g_failure_hook_mutex);
  g_failure_hook = std::move(hook);
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
  exit_after(kAbortGrace, exit_code);
  std::function<void(const std::string&)> hook;
  {
    std::lock_guard lock(g_failure_hook_mutex);
    hook = g_failure_hook;
  }
  if (hook) hook(message);
  if (size > 1) MPI_Abort(MPI_COMM_WORLD, exit_code);
  std::exit(exit_code);
}

}  // namespace mlaserve::runtime
