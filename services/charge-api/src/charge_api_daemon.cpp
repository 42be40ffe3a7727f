#include "charge_api_daemon.hpp"

#include "charge_api_app.hpp"

namespace charge_outbox::charge_api {
namespace {

class ChargeApiDaemon final : public app::Daemon {
 public:
  ChargeApiDaemon()
      : app::Daemon({.name = "charge-api",
                    .usage = "usage: charge-api [--config PATH]",
                    .failpoints = true,
                    .required = "database.url acquirer.url acquirer.api_key"}) {}

  app::Settings Configure(const std::vector<std::string>& args, config::ConfigReader& reader) override {
    if (!args.empty()) throw config::ConfigError("argv", std::string(profile().usage));
    config_ = LoadConfig(reader);
    return {.log_level = config_.log_level, .schema_database_url = config_.database_url};
  }

  int Run(const app::ShutdownSignals& signals) override {
    ChargeApiApp api(config_);
    api.Start();
    return app::RunUntilSignal(signals, config_.shutdown_deadline,
                               [&](std::chrono::milliseconds drain) { api.Stop(drain); });
  }

 private:
  ChargeApiConfig config_;
};

}  // namespace

std::unique_ptr<app::Daemon> MakeDaemon() { return std::make_unique<ChargeApiDaemon>(); }

}  // namespace charge_outbox::charge_api
