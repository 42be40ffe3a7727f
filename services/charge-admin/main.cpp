// charge-admin: what a person on call does with a charge the product handed to them: find it, read its
// whole story, ask the acquirer, and decide it, with an audit trail and the event consumers need. See
// README.md. Start-up (flags, configuration, logs, schema check, exit status) is every binary's app::Main.
#include "admin_daemon.hpp"
#include "charge_outbox/app/daemon.hpp"

int main(int argc, char** argv) {
  const auto daemon = charge_outbox::charge_admin::MakeDaemon();
  return charge_outbox::app::Main(argc, argv, *daemon);
}
