#include "projection_daemon.hpp"

#include "charge_outbox/db/migrations.hpp"
#include "charge_outbox/inbox/inbox.hpp"
#include "projection_app.hpp"
#include "projection_config.hpp"

namespace charge_outbox::settlement {
namespace {

class ProjectionDaemon final : public app::Daemon {
 public:
  ProjectionDaemon()
      : app::Daemon({.name = "settlement-projection",
                     .usage = "usage: settlement-projection [--config FILE] [migrate]",
                     .failpoints = true,
                     .required = "database.url kafka.bootstrap_servers http.token_hashes"}) {}

  app::Settings Configure(const std::vector<std::string>& args, config::ConfigReader& reader) override {
    if (!(args.empty() || (args.size() == 1 && args[0] == "migrate"))) {
      throw config::ConfigError("argv", std::string(profile().usage));
    }
    migrate_ = !args.empty();
    config_ = LoadConfig(reader);
    if (!migrate_) RequireApiTokens(config_);
    return {.log_level = config_.log_level};  // two schemas, not charge-api's: see CheckSchema
  }

  // Both schemas, the inbox's and the projection's; `migrate` is what brings them up to date.
  void CheckSchema(const app::Settings&) override {
    if (migrate_) return;
    const db::SchemaCheck inbox{.ledger = inbox::kInboxLedger, .migrate_command = "settlement-projection migrate"};
    db::RequireSchemaVersion(config_.inbox.database_url, inbox::InboxMigrations().back().version, inbox);
    db::RequireSchemaVersion(config_.inbox.database_url, ProjectionMigrations().back().version,
                             {.ledger = "schema_migrations", .migrate_command = inbox.migrate_command});
  }

  int Run(const app::ShutdownSignals& signals) override {
    if (migrate_) return Migrate(config_);
    return app::StartAndServe<ProjectionApp, inbox::InboxConfigError>(
        signals, config_.shutdown_deadline, profile(), "are http.port and admin.port free?", config_);
  }

 private:
  bool migrate_ = false;
  ProjectionConfig config_;
};

}  // namespace

std::unique_ptr<app::Daemon> MakeDaemon() { return std::make_unique<ProjectionDaemon>(); }

}  // namespace charge_outbox::settlement
