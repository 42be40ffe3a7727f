// acquirer-sim's command line: `acquirer-sim [--config PATH]`; everything else is configuration.
#pragma once

#include <string>
#include <vector>

namespace charge_outbox::acquirer_sim {

struct CommandLine {
  std::string config_path;  // may be empty: defaults and environment only
};

// Throws config::ConfigError (key "argv", or "--config" without its value) on a bad command line.
CommandLine ParseCommandLine(const std::vector<std::string>& args);

}  // namespace charge_outbox::acquirer_sim
