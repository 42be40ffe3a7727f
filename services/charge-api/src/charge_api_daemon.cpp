#include "charge_api_daemon.hpp"

#include "charge_api_app.hpp"
#include "charge_outbox/db/migrations.hpp"

namespace charge_outbox::charge_api {
namespace {

class ChargeApiDaemon final : public app::Daemon {
 public:
  ChargeApiDaemon()
      : app::Daemon({.name = "charge-api", .usage = "usage: charge-api [--config PATH]", .failpoints = true}) {}

  void Configure(const std::vector<std::string>& args, config::ConfigReader& reader) override {
    if (!args.empty()) throw config::ConfigError("argv", std::string(profile().usage));
    config_ = LoadConfig(reader);
  }
  std::string LogLevel() const override { return config_.log_level; }
  void CheckSchema() override { db::RequireSchemaVersion(config_.database_url, db::EmbeddedSchemaVersion()); }

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
