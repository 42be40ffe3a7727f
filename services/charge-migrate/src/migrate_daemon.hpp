// charge-migrate's part in the start-up path (app/daemon.hpp): `up` or `status` (migrate_app.hpp), once.
// It checks no schema (bringing it up to date is its job), reads no failpoints, and leaves SIGTERM at its
// default: the migration's transaction rolls back.
#pragma once

#include <memory>

#include "charge_outbox/app/daemon.hpp"

namespace charge_outbox::migrate {
std::unique_ptr<app::Daemon> MakeDaemon();
}  // namespace charge_outbox::migrate
