// acquirer-sim: a faithful, fault-injectable stand-in for a card acquirer, for the local stack and tests.
// Start-up (flags, configuration, logs, signals, exit status) is every daemon's app::Main; what is
// acquirer-sim's own is in src/acquirer_sim_daemon.cpp.
#include "acquirer_sim_daemon.hpp"
#include "charge_outbox/app/daemon.hpp"

int main(int argc, char** argv) {
  const auto daemon = charge_outbox::acquirer_sim::MakeDaemon();
  return charge_outbox::app::Main(argc, argv, *daemon);
}
