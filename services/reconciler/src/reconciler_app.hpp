// ReconcilerApp: wires one run together (database pool, the two stores, the acquirer client, the retry
// policy) and runs it: a pending sweep, or a window report. Each run ends with its summary line, its
// metrics pushed when a Pushgateway is configured, and the process's exit status.
#pragma once

#include <chrono>
#include <memory>
#include <string>

#include "charge_outbox/app/shutdown.hpp"
#include "command_line.hpp"
#include "reconciler_config.hpp"

namespace charge_outbox::reconciler {

// Exit status of a run that had errors (0: none; 2, config::kExitConfigError: bad configuration).
inline constexpr int kExitRunErrors = 1;

class ReconcilerApp {
 public:
  explicit ReconcilerApp(ReconcilerConfig config);
  ~ReconcilerApp();
  ReconcilerApp(const ReconcilerApp&) = delete;
  ReconcilerApp& operator=(const ReconcilerApp&) = delete;

  // One sweep of the due pending charges. A SIGTERM or SIGINT (blocked by the caller's ShutdownSignals,
  // see app::Main) stops it early: work in progress finishes, the rest is given back.
  int RunSweep(const app::ShutdownSignals& signals);

  // The window report for the command's window ([from, to), or TrailingWindow by the run's clock with the
  // visibility window as the settle time), written to its `output` (a file, replaced atomically) or, when
  // that is empty, to `report_fd` (the original stdout).
  int RunWindow(const CommandLine& command, int report_fd);

 private:
  struct Parts;
  std::unique_ptr<Parts> parts_;
};

}  // namespace charge_outbox::reconciler
