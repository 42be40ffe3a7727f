// charge-api: idempotent charges over HTTP, intent written before the acquirer is called.
#include <spdlog/spdlog.h>

#include <iostream>
#include <vector>

#include "charge_api_app.hpp"
#include "charge_outbox/app/shutdown.hpp"
#include "charge_outbox/config/config.hpp"
#include "charge_outbox/db/migrations.hpp"
#include "charge_outbox/failpoints/failpoints.hpp"
#include "charge_outbox/log/log.hpp"

int main(int argc, char** argv) {
  using namespace charge_outbox;
  app::ShutdownSignals signals;  // before any thread starts

  charge_api::ChargeApiConfig config;
  try {
    const std::vector<std::string> args(argv + 1, argv + argc);
    if (!(args.empty() || (args.size() == 2 && args[0] == "--config"))) {
      throw config::ConfigError("argv", "usage: charge-api [--config PATH]");
    }
    auto reader = config::ConfigReader::FromFile(args.empty() ? "" : args[1]);
    config = charge_api::LoadConfig(reader);
    failpoints::ConfigureFromEnvironment();
  } catch (const config::ConfigError& e) {
    std::cerr << e.what() << "\n";
    return config::kExitConfigError;
  }
  log::Init("charge-api", config.log_level);

  try {
    db::RequireSchemaVersion(config.database_url, db::EmbeddedSchemaVersion());
  } catch (const db::MigrationError& e) {
    spdlog::error("{}", e.what());
    return 1;
  }

  charge_api::ChargeApiApp app(config);
  app.Start();
  return app::RunUntilSignal(signals, config.shutdown_deadline,
                             [&](std::chrono::milliseconds drain) { app.Stop(drain); });
}
