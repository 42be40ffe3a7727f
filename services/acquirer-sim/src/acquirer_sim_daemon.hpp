// acquirer-sim's part in the start-up path (app/daemon.hpp): its configuration and the simulator served
// until SIGTERM (acquirer_sim.hpp's Run). No schema (it has no database) and no failpoints.
#pragma once

#include <memory>

#include "charge_outbox/app/daemon.hpp"

namespace charge_outbox::acquirer_sim {
std::unique_ptr<app::Daemon> MakeDaemon();
}  // namespace charge_outbox::acquirer_sim
