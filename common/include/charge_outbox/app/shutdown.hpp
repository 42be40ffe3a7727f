// Shutdown: how a daemon waits for SIGTERM/SIGINT and then stops within a deadline.
//
//   int main() {
//     app::ShutdownSignals signals;   // first, before any thread exists
//     ... start the server ...
//     return app::RunUntilSignal(signals, config.shutdown_deadline,
//                                [&](std::chrono::milliseconds drain) { server.Stop(drain); });
//   }
//
// Kubernetes sends SIGTERM and, terminationGracePeriodSeconds later, SIGKILL. A daemon that stops within
// its deadline exits 0; one whose stop hangs exits kExitShutdownOverrun by itself, so a stuck shutdown is
// visible as a non-zero exit with a log line rather than as an anonymous SIGKILL.
#pragma once

#include <signal.h>

#include <chrono>
#include <functional>
#include <optional>

namespace charge_outbox::app {

// Exit status when stopping took longer than the deadline (1 is a runtime failure, 2 a config error).
inline constexpr int kExitShutdownOverrun = 3;

// Blocks SIGTERM and SIGINT in the calling thread, and so in every thread it starts afterwards: the
// signals stay pending until Wait() takes them, and no other thread is ever interrupted by them. Create
// it in main() before any thread exists (a thread started earlier would still get the default action,
// which kills the process). Not copyable; the destructor restores the previous signal mask.
class ShutdownSignals {
 public:
  ShutdownSignals();
  ~ShutdownSignals();
  // One that blocks nothing: SIGTERM and SIGINT keep their default action and end the process at once.
  // For a one-shot command with nothing to drain (charge-migrate: its transaction rolls back); WaitFor
  // never sees a signal, and Wait must not be called.
  static ShutdownSignals Unblocked();
  ShutdownSignals(const ShutdownSignals&) = delete;
  ShutdownSignals& operator=(const ShutdownSignals&) = delete;

  // Blocks until SIGTERM or SIGINT arrives; returns the signal number.
  int Wait() const;
  // Like Wait, but gives up after `timeout` and returns std::nullopt.
  std::optional<int> WaitFor(std::chrono::milliseconds timeout) const;

 private:
  explicit ShutdownSignals(bool block);

  bool blocked_ = false;
  sigset_t signals_{};
  sigset_t previous_{};
};

// How `deadline` is split: `stop` is given the drain budget (deadline minus a reserve of a quarter of
// it, at most 2s) and the reserve is left for closing what is still open after draining, and flushing.
std::chrono::milliseconds DrainBudget(std::chrono::milliseconds deadline);

// Calls stop(DrainBudget(deadline)) on this thread under a watchdog: if stop has not returned
// `deadline` after the call, the watchdog logs an error, flushes the log and ends the process at once
// with kExitShutdownOverrun (no destructors run: they might be what hangs).
void StopWithin(std::chrono::milliseconds deadline, const std::function<void(std::chrono::milliseconds)>& stop);

// Waits for SIGTERM or SIGINT, logs it, then StopWithin(deadline, stop). Returns 0, the exit status of a
// clean stop.
int RunUntilSignal(const ShutdownSignals& signals, std::chrono::milliseconds deadline,
                   const std::function<void(std::chrono::milliseconds)>& stop);

// Like RunUntilSignal, for a service that can also end by itself (a fatal Kafka error): polls `finished`
// between waits, and once it returns a status calls stop(0) and returns that status, so the orchestrator
// starts a clean process.
int RunUntilSignal(const ShutdownSignals& signals, std::chrono::milliseconds deadline,
                   const std::function<void(std::chrono::milliseconds)>& stop,
                   const std::function<std::optional<int>()>& finished);

}  // namespace charge_outbox::app
