// charge-api: idempotent charges over HTTP, intent written before the acquirer is called.
// Start-up (flags, configuration, logs, schema check, failpoints, signals, exit status) is every daemon's
// app::Main; what is charge-api's own is in src/charge_api_daemon.cpp.
#include "charge_api_daemon.hpp"
#include "charge_outbox/app/daemon.hpp"

int main(int argc, char** argv) {
  const auto daemon = charge_outbox::charge_api::MakeDaemon();
  return charge_outbox::app::Main(argc, argv, *daemon);
}
