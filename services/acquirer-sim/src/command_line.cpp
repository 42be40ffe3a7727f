#include "command_line.hpp"

#include "charge_outbox/config/config.hpp"

namespace charge_outbox::acquirer_sim {

CommandLine ParseCommandLine(const std::vector<std::string>& args) {
  constexpr const char* kUsage = "usage: acquirer-sim [--config PATH]";
  CommandLine cli;
  for (std::size_t i = 0; i < args.size(); ++i) {
    if (args[i] == "--config") {
      if (i + 1 >= args.size()) throw config::ConfigError("--config", std::string("needs a value; ") + kUsage);
      cli.config_path = args[++i];
    } else {
      throw config::ConfigError("argv", "unexpected argument \"" + args[i] + "\"; " + kUsage);
    }
  }
  return cli;
}

}  // namespace charge_outbox::acquirer_sim
