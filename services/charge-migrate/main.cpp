// charge-migrate: the Helm pre-install/pre-upgrade hook that brings the schema up to date.
// Start-up (flags, configuration, logs, signals, exit status) is every daemon's app::Main; what is
// charge-migrate's own is in src/migrate_daemon.cpp.
#include "charge_outbox/app/daemon.hpp"
#include "migrate_daemon.hpp"

int main(int argc, char** argv) {
  const auto daemon = charge_outbox::migrate::MakeDaemon();
  return charge_outbox::app::Main(argc, argv, *daemon);
}
