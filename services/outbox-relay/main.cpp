// outbox-relay: publishes outbox events to Kafka, in order per charge, with several replicas sharing the
// shards; also the operator's subcommands for parked events and retention.
#include <spdlog/spdlog.h>

#include <iostream>
#include <vector>

#include "charge_outbox/app/shutdown.hpp"
#include "charge_outbox/config/config.hpp"
#include "charge_outbox/db/migrations.hpp"
#include "charge_outbox/failpoints/failpoints.hpp"
#include "charge_outbox/kafka/event_publisher.hpp"
#include "charge_outbox/log/log.hpp"
#include "relay_app.hpp"
#include "subcommands.hpp"

int main(int argc, char** argv) {
  using namespace charge_outbox;
  app::ShutdownSignals signals;  // before any thread starts

  std::vector<std::string> args(argv + 1, argv + argc);
  std::string config_path;
  if (args.size() >= 2 && args[0] == "--config") {
    config_path = args[1];
    args.erase(args.begin(), args.begin() + 2);
  }
  const bool subcommand = outbox_relay::IsSubcommand(args);

  outbox_relay::RelayConfig config;
  try {
    if (!args.empty() && args[0].rfind("-", 0) == 0) throw config::ConfigError("argv", outbox_relay::kUsage);
    auto reader = config::ConfigReader::FromFile(config_path);
    config = outbox_relay::LoadConfig(reader, !subcommand);
    failpoints::ConfigureFromEnvironment();
  } catch (const config::ConfigError& e) {
    std::cerr << e.what() << "\n";
    return config::kExitConfigError;
  }
  log::Init("outbox-relay", config.log_level);

  try {
    db::RequireSchemaVersion(config.database_url, db::EmbeddedSchemaVersion());
  } catch (const db::MigrationError& e) {
    spdlog::error("{}", e.what());
    return 1;
  }
  if (subcommand) return outbox_relay::RunSubcommand(config, args);

  std::unique_ptr<outbox_relay::RelayApp> app;
  try {
    app = std::make_unique<outbox_relay::RelayApp>(config);
  } catch (const kafka::KafkaConfigError& e) {
    std::cerr << e.what() << "\n";
    return config::kExitConfigError;
  }
  try {
    app->Start();
  } catch (const std::exception& e) {
    spdlog::error("outbox-relay could not start: {} (is admin.port free?)", e.what());
    log::Flush();
    return 1;
  }
  // Until SIGTERM, or until the loop ends by itself (a fatal producer error): then exit non-zero so the
  // orchestrator starts a clean process.
  while (true) {
    if (const auto signal = signals.WaitFor(std::chrono::milliseconds{200})) {
      spdlog::info("signal {}: stopping", *signal);
      app::StopWithin(config.shutdown_deadline, [&](std::chrono::milliseconds drain) { app->Stop(drain); });
      log::Flush();
      return 0;
    }
    if (const auto code = app->Finished()) {
      app->Stop(std::chrono::milliseconds{0});
      log::Flush();
      return *code;
    }
  }
}
