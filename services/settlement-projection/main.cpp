// settlement-projection: consumes charge-events through the inbox and keeps each merchant's captured
// totals per day for settlement, queryable over HTTP. `migrate` applies its database's migrations.
// Start-up (flags, configuration, logs, schema check, failpoints, signals, exit status) is every daemon's
// app::Main; what is the projection's own is in src/projection_daemon.cpp.
#include "charge_outbox/app/daemon.hpp"
#include "projection_daemon.hpp"

int main(int argc, char** argv) {
  const auto daemon = charge_outbox::settlement::MakeDaemon();
  return charge_outbox::app::Main(argc, argv, *daemon);
}
