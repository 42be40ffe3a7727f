// settlement-projection's part in the start-up path (app/daemon.hpp): the daemon (ProjectionApp until
// SIGTERM, or until its consumer ends by itself) or `migrate`, which applies its database's migrations.
#pragma once

#include <memory>

#include "charge_outbox/app/daemon.hpp"

namespace charge_outbox::settlement {
std::unique_ptr<app::Daemon> MakeDaemon();
}  // namespace charge_outbox::settlement
