// acquirer-sim: a faithful, fault-injectable stand-in for a card acquirer, for the local stack and tests.
#include <iostream>
#include <vector>

#include "acquirer_sim.hpp"
#include "charge_outbox/app/shutdown.hpp"
#include "charge_outbox/config/config.hpp"
#include "charge_outbox/log/log.hpp"

int main(int argc, char** argv) {
  using namespace charge_outbox;
  const app::ShutdownSignals signals;  // before any thread starts
  acquirer_sim::SimConfig config;
  try {
    const auto cli = acquirer_sim::ParseCommandLine({argv + 1, argv + argc});
    auto reader = config::ConfigReader::FromFile(cli.config_path);
    config = acquirer_sim::LoadConfig(reader);
  } catch (const config::ConfigError& e) {
    std::cerr << e.what() << "\n";
    return config::kExitConfigError;
  }
  log::Init("acquirer-sim", config.log_level);
  const int status = acquirer_sim::Run(config, signals);
  log::Flush();
  return status;
}
