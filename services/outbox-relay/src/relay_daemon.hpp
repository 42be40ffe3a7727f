// outbox-relay's part in the start-up path (app/daemon.hpp): the daemon (RelayApp until SIGTERM, or until
// its loop ends by itself: then its non-zero status) or, with a subcommand, one operator command
// (subcommands.hpp).
#pragma once

#include <memory>

#include "charge_outbox/app/daemon.hpp"

namespace charge_outbox::outbox_relay {
std::unique_ptr<app::Daemon> MakeDaemon();
}  // namespace charge_outbox::outbox_relay
