// charge-api's part in the start-up path (app/daemon.hpp): its configuration, the schema check, and
// ChargeApiApp served until SIGTERM.
#pragma once

#include <memory>

#include "charge_outbox/app/daemon.hpp"

namespace charge_outbox::charge_api {
std::unique_ptr<app::Daemon> MakeDaemon();
}  // namespace charge_outbox::charge_api
