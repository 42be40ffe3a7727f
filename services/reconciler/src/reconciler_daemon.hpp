// The reconciler's part in the start-up path (app/daemon.hpp): one sweep or one window report
// (command_line.hpp); a report on stdout is alone there, and a run that cannot start still prints its
// summary line.
#pragma once

#include <memory>

#include "charge_outbox/app/daemon.hpp"

namespace charge_outbox::reconciler {
std::unique_ptr<app::Daemon> MakeDaemon();
}  // namespace charge_outbox::reconciler
