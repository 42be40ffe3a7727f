// charge-admin's part of the start-up path every binary shares (app::Main): its command line, its
// configuration, and one command run to its end.
#pragma once

#include <memory>

#include "charge_outbox/app/daemon.hpp"

namespace charge_outbox::charge_admin {

std::unique_ptr<app::Daemon> MakeDaemon();

}  // namespace charge_outbox::charge_admin
