// outbox-relay: publishes outbox events to Kafka, in order per charge, with several replicas sharing the
// shards; also the operator's subcommands for parked events and retention.
// Start-up (flags, configuration, logs, schema check, failpoints, signals, exit status) is every daemon's
// app::Main; what is the relay's own is in src/relay_daemon.cpp.
#include "charge_outbox/app/daemon.hpp"
#include "relay_daemon.hpp"

int main(int argc, char** argv) {
  const auto daemon = charge_outbox::outbox_relay::MakeDaemon();
  return charge_outbox::app::Main(argc, argv, *daemon);
}
