// settlement-projection: consumes charge-events through the inbox and keeps each merchant's captured
// totals per day for settlement, queryable over HTTP. `migrate` applies its database's migrations.
#include <spdlog/spdlog.h>

#include <iostream>
#include <string>
#include <vector>

#include "charge_outbox/app/shutdown.hpp"
#include "charge_outbox/config/config.hpp"
#include "charge_outbox/failpoints/failpoints.hpp"
#include "charge_outbox/log/log.hpp"
#include "projection_app.hpp"

namespace {
constexpr const char* kUsage = "usage: settlement-projection [--config FILE] [migrate]";
}

int main(int argc, char** argv) {
  using namespace charge_outbox;
  app::ShutdownSignals signals;  // before any thread starts

  std::vector<std::string> args(argv + 1, argv + argc);
  std::string config_path;
  if (args.size() >= 2 && args[0] == "--config") {
    config_path = args[1];
    args.erase(args.begin(), args.begin() + 2);
  }
  settlement::ProjectionConfig config;
  try {
    if (!(args.empty() || (args.size() == 1 && args[0] == "migrate"))) throw config::ConfigError("argv", kUsage);
    auto reader = config::ConfigReader::FromFile(config_path);
    config = settlement::LoadConfig(reader);
    failpoints::ConfigureFromEnvironment();
  } catch (const config::ConfigError& e) {
    std::cerr << e.what() << "\n";
    return config::kExitConfigError;
  }
  log::Init("settlement-projection", config.log_level);
  const int status = args.empty() ? settlement::Run(config, signals) : settlement::Migrate(config);
  log::Flush();
  return status;
}
