// reconciler: one run of the CronJob that finds the truth about pending charges at the acquirer, or a
// window report (`reconciler window --from T --to T` or `--last 1h`). See README.md.
// Start-up (flags, configuration, logs, schema check, failpoints, signals, exit status) is every daemon's
// app::Main; what is the reconciler's own is in src/reconciler_daemon.cpp.
#include "charge_outbox/app/daemon.hpp"
#include "reconciler_daemon.hpp"

int main(int argc, char** argv) {
  const auto daemon = charge_outbox::reconciler::MakeDaemon();
  return charge_outbox::app::Main(argc, argv, *daemon);
}
