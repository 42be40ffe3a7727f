// charge-migrate: the Helm pre-install/pre-upgrade hook that brings the schema up to date.
#include <iostream>
#include <vector>

#include "charge_outbox/config/config.hpp"
#include "charge_outbox/log/log.hpp"
#include "migrate_app.hpp"

int main(int argc, char** argv) {
  using namespace charge_outbox;
  migrate::CommandLine cli;
  migrate::MigrateConfig config;
  try {
    cli = migrate::ParseCommandLine({argv + 1, argv + argc});
    auto reader = config::ConfigReader::FromFile(cli.config_path);
    config = migrate::LoadConfig(reader);
  } catch (const config::ConfigError& e) {
    std::cerr << e.what() << "\n";
    return config::kExitConfigError;
  }
  log::Init("charge-migrate", config.log_level);
  const int status = migrate::Run(cli, config);
  log::Flush();
  return status;
}
