#include "migrate_daemon.hpp"

#include "migrate_app.hpp"

namespace charge_outbox::migrate {
namespace {

class MigrateDaemon final : public app::Daemon {
 public:
  MigrateDaemon() : app::Daemon({.name = "charge-migrate", .usage = kUsage, .signals = false, .required = "database.url"}) {}

  app::Settings Configure(const std::vector<std::string>& args, config::ConfigReader& reader) override {
    command_ = ParseCommandLine(args);
    config_ = LoadConfig(reader);
    return {.log_level = config_.log_level};  // its schema is what it changes
  }
  int Run(const app::ShutdownSignals&) override { return migrate::Run(command_, config_); }

 private:
  CommandLine command_;
  MigrateConfig config_;
};

}  // namespace

std::unique_ptr<app::Daemon> MakeDaemon() { return std::make_unique<MigrateDaemon>(); }

}  // namespace charge_outbox::migrate
