#include "parallel/collective_watchdog.h"

#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <csignal>
#include <cstring>
#include <mutex>
#include <thread>

namespace mlaserve::parallel {

namespace {

using Clock = std::chrono::steady_clock;
using namespace std::chrono_literals;

// A wait that lasts this long while mpirun is ending the job will not end by itself. mpirun
// starts its kill sequence within ~0.1 s of a rank's death, when the survivors' wait has just
// begun, and its SIGKILL follows ~1 s later (measured with MultiHostFault.RankKilled...: the
// SIGCONT came 0.06–0.07 s into rank 0's wait in 3 of 3 runs). With a patience of 1 s rank 0 was
// killed while it answered its clients; 0.3 s leaves it the rest of that second.
constexpr auto kStopSignalPatience = 300ms;
// How long such a signal counts: one long after (a user's SIGCONT to a resumed server) does not.
constexpr auto kStopSignalValidity = 3s;
constexpr auto kTick = 100ms;
// A tick this late means that this process was stopped (SIGSTOP, a terminal's ^Z, a paused VM),
// not slow: the time it stood still does not count against its own wait, and the SIGCONT that
// resumed it is not mpirun's kill sequence. (Were it stopped alone, its peers' watchdogs still
// end the job at their deadline.)
constexpr auto kStoppedGap = 1s;

struct WaitInFlight {
  bool active = false;
  const char* op = "";
  const char* comm = "";
  int64_t layer = -1;
  Clock::time_point since;
};

struct WatchdogState {
  std::mutex mutex;
  WatchdogOptions options;
  int rank = 0;
  std::string host;
  WaitInFlight wait;
  int64_t step = 0;
  double slowest_step_seconds = 0;
  std::function<void(const std::string&)> end_job;
  bool running = false;
  Clock::time_point resumed;  // when the watchdog last found that this process had been stopped
};

WatchdogState& state() {
  static WatchdogState s;
  return s;
}

std::atomic<int> g_stop_signal{0};
std::atomic<int64_t> g_stop_signal_at_ns{0};  // steady clock

std::string layer_text(int64_t layer) {
  if (layer == kNoLayer) return "";
  if (layer < 0) return " at the embedding";
  return fmt::format(" at layer {}", layer);
}

// The message for the wait in flight, or "" while it is within its deadline.
std::string expired_wait(WatchdogState& s, Clock::time_point now) {
  if (!s.wait.active) return "";
  const double waited = std::chrono::duration<double>(now - s.wait.since).count();
  const std::string where =
      fmt::format("rank {} on host {} waited {:.1f} s in {} over {}{} of step {}", s.rank, s.host,
                  waited, s.wait.op, s.wait.comm, layer_text(s.wait.layer), s.step);
  const Clock::time_point signalled{std::chrono::nanoseconds(g_stop_signal_at_ns.load())};
  const int sig = g_stop_signal.load();
  // Only a SIGCONT resumes a stopped process; a SIGTERM near a late tick (a loaded machine)
  // still counts.
  const bool resumed_by_it =
      sig == SIGCONT && std::chrono::abs(signalled - s.resumed) < kStoppedGap;
  if (sig != 0 && !resumed_by_it && now - signalled < kStopSignalValidity &&
      now - s.wait.since >= kStopSignalPatience) {
    return fmt::format("mpirun is ending the job (signal {}, {}) while {}: another rank failed",
                       sig, strsignal(sig), where);
  }
  const double deadline = wait_deadline_seconds(s.options, s.slowest_step_seconds);
  if (waited < deadline) return "";
  return fmt::format(
      "collective timeout: {}; the deadline is {:.1f} s (--collective-timeout {:.1f} s, or {}x "
      "the slowest step, {:.2f} s): a rank or its host stopped answering, ending the job",
      where, deadline, s.options.floor_seconds, s.options.step_multiple, s.slowest_step_seconds);
}

void watch() {
  WatchdogState& s = state();
  Clock::time_point previous = Clock::now();
  for (;;) {
    std::this_thread::sleep_for(kTick);
    const Clock::time_point now = Clock::now();
    std::unique_lock lock(s.mutex);
    if (now - previous > kStoppedGap) {
      s.wait.since += now - previous - kTick;
      s.resumed = now;
    }
    previous = now;
    const std::string message = expired_wait(s, now);
    if (message.empty()) continue;
    const auto end_job = s.end_job;
    lock.unlock();  // the step loop stays blocked in MPI; its CollectiveWait must not block too
    end_job(message);
    return;
  }
}

}  // namespace

double wait_deadline_seconds(const WatchdogOptions& options, double slowest_step_seconds) {
  return std::max(options.floor_seconds, options.step_multiple * slowest_step_seconds);
}

void start_watchdog(const WatchdogOptions& options, int world_rank, const std::string& host,
                    std::function<void(const std::string& message)> end_job) {
  WatchdogState& s = state();
  std::lock_guard lock(s.mutex);
  if (s.running) return;
  s.options = options;
  s.rank = world_rank;
  s.host = host;
  s.end_job = std::move(end_job);
  s.running = true;
  std::thread(watch).detach();
}

void watchdog_begin_step(int64_t step) {
  std::lock_guard lock(state().mutex);
  state().step = step;
}

void watchdog_end_step(double seconds) {
  std::lock_guard lock(state().mutex);
  state().slowest_step_seconds = std::max(state().slowest_step_seconds, seconds);
}

void watchdog_note_stop_signal(int signal) {
  g_stop_signal_at_ns.store(Clock::now().time_since_epoch().count());
  g_stop_signal.store(signal);
}

CollectiveWait::CollectiveWait(const char* op, const char* comm, int64_t layer) {
  WatchdogState& s = state();
  std::lock_guard lock(s.mutex);
  s.wait = {true, op, comm, layer, Clock::now()};
}

CollectiveWait::~CollectiveWait() {
  WatchdogState& s = state();
  std::lock_guard lock(s.mutex);
  s.wait.active = false;
}

}  // namespace mlaserve::parallel
