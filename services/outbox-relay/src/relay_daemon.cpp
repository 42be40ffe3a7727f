#include "relay_daemon.hpp"

#include "charge_outbox/kafka/event_publisher.hpp"
#include "relay_app.hpp"
#include "subcommands.hpp"

namespace charge_outbox::outbox_relay {
namespace {

class RelayDaemon final : public app::Daemon {
 public:
  RelayDaemon() : app::Daemon({.name = "outbox-relay",
                                 .usage = kUsage,
                                 .failpoints = true,
                                 .required = "database.url kafka.bootstrap_servers"}) {}

  app::Settings Configure(const std::vector<std::string>& args, config::ConfigReader& reader) override {
    if (!args.empty() && args[0].rfind("-", 0) == 0) throw config::ConfigError("argv", kUsage);
    subcommand_ = args;
    // A subcommand only reads the database: the Kafka settings need not be there.
    config_ = LoadConfig(reader, /*need_kafka=*/!IsSubcommand(subcommand_));
    return {.log_level = config_.log_level, .schema_database_url = config_.database_url};
  }

  int Run(const app::ShutdownSignals& signals) override {
    if (IsSubcommand(subcommand_)) return RunSubcommand(config_, subcommand_);
    return app::StartAndServe<RelayApp, kafka::KafkaConfigError>(signals, config_.shutdown_deadline, profile(),
                                                                  "is admin.port free?", config_);
  }

 private:
  std::vector<std::string> subcommand_;  // empty: run the relay
  RelayConfig config_;
};

}  // namespace

std::unique_ptr<app::Daemon> MakeDaemon() { return std::make_unique<RelayDaemon>(); }

}  // namespace charge_outbox::outbox_relay
