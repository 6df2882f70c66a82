// A deadline on every wait for other ranks. A peer that died, froze (SIGSTOP) or lost its link
// leaves a TCP collective blocked for good: no error ever comes back from MPI. Each collective,
// the step plan's broadcast and the results' gather run inside a CollectiveWait; one thread per
// process watches the wait in flight and, past its deadline, ends the job with a message naming
// the wait (operation, communicator, layer, step), the rank and its host.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

namespace mlaserve::parallel {

struct WatchdogOptions {
  double floor_seconds = 15;  // --collective-timeout
  double step_multiple = 5;   // a wait may also last this many times the slowest step seen
};

// How long one wait may last: max(floor, step_multiple x the slowest step seen so far). The
// floor covers the first steps and short waits; the multiple, a layout whose steps are slow.
double wait_deadline_seconds(const WatchdogOptions& options, double slowest_step_seconds);

// Starts the watching thread (once per process; jobs of more than one rank). `world_rank` and
// `host` go into every message; `end_job` runs on the watching thread when a deadline passes
// and must not return (runtime::abort_job).
void start_watchdog(const WatchdogOptions& options, int world_rank, const std::string& host,
                    std::function<void(const std::string& message)> end_job);

// The step whose collectives follow (for messages), and a step's duration once it ended.
void watchdog_begin_step(int64_t step);
void watchdog_end_step(double seconds);

// From a signal handler (async-signal-safe): mpirun is ending the job. Its kill sequence is
// SIGCONT, a second later SIGTERM, and SIGKILL a few milliseconds after that: when a rank died
// or a host was lost. A wait that lasts 0.3 s after (or across) such a signal will not end by
// itself, so the watchdog ends this process then, as for a missed deadline (serve's rank 0
// thereby answers its clients within the second SIGCONT leaves).
void watchdog_note_stop_signal(int signal);

// A wait outside the forward's layers (the plan's broadcast, the results' gather).
constexpr int64_t kNoLayer = -2;

// One wait for other ranks, for its lifetime. `op` and `comm` must outlive it. `layer` as the
// forward numbers them: -1 is the embedding's, kNoLayer outside the forward.
class CollectiveWait {
 public:
  CollectiveWait(const char* op, const char* comm, int64_t layer);
  ~CollectiveWait();
  CollectiveWait(const CollectiveWait&) = delete;
  CollectiveWait& operator=(const CollectiveWait&) = delete;
};

}  // namespace mlaserve::parallel
