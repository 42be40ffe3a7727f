// The operator's subcommands: parked rows (list, retry, skip) and one retention run. Each prints its
// result on stdout and returns the process exit status.
#pragma once

#include <string>
#include <vector>

#include "relay_config.hpp"

namespace charge_outbox::outbox_relay {

// Whether `args` (argv after the options) names a subcommand rather than the daemon.
bool IsSubcommand(const std::vector<std::string>& args);

// `parked list [LIMIT]`, `parked retry ID`, `parked skip ID`, `retention`. Exit status: 0 done, 1 database
// error or nothing to change (the message says which), 2 usage.
int RunSubcommand(const RelayConfig& config, const std::vector<std::string>& args);

inline constexpr const char* kUsage =
    "usage: outbox-relay [--config PATH]                       run the relay\n"
    "       outbox-relay [--config PATH] parked list [LIMIT]   parked events, one JSON object per line\n"
    "       outbox-relay [--config PATH] parked retry ID --by NAME --reason TEXT   send a parked event again\n"
    "       outbox-relay [--config PATH] parked skip ID --by NAME --reason TEXT    give up on it (never sent)\n"
    "       outbox-relay [--config PATH] retention             create partitions ahead, drop old published ones\n";

}  // namespace charge_outbox::outbox_relay
