#include "migrate_app.hpp"

#include <spdlog/spdlog.h>

#include <iostream>

#include "charge_outbox/db/migrations.hpp"
#include "charge_outbox/log/log.hpp"

namespace charge_outbox::migrate {

MigrateConfig LoadConfig(config::ConfigReader& reader) {
  MigrateConfig c;
  c.database_url = reader.Secret("database.url");
  c.lock_timeout = reader.Duration("migrate.lock_timeout", std::chrono::seconds{30}, std::chrono::milliseconds{1});
  c.log_level = reader.Choice("log.level", "info", {std::begin(log::kLevels), std::end(log::kLevels)});
  reader.RejectUnknownKeys();
  reader.RejectUnknownEnvironment({"migrate"});
  return c;
}

CommandLine ParseCommandLine(const std::vector<std::string>& args) {
  auto usage_error = [](const std::string& problem) {
    return config::ConfigError("argv", problem + "; " + kUsage);
  };
  CommandLine cli;
  for (auto arg = args.begin(); arg != args.end(); ++arg) {
    if (*arg == "--migrations-dir") {
      if (std::next(arg) == args.end()) throw config::ConfigError(*arg, std::string("needs a value; ") + kUsage);
      cli.migrations_dir = *++arg;
    } else if ((*arg == "up" || *arg == "status") && cli.command.empty()) {
      cli.command = *arg;
    } else {
      throw usage_error("unexpected argument \"" + *arg + "\"");
    }
  }
  if (cli.command.empty()) throw usage_error("missing command");
  return cli;
}

int Run(const CommandLine& cli, const MigrateConfig& config) {
  try {
    auto migrations = cli.migrations_dir.empty() ? db::EmbeddedMigrations()
                                                 : db::LoadMigrationsFromDirectory(cli.migrations_dir);
    db::Migrator migrator(config.database_url, std::move(migrations), {.lock_timeout = config.lock_timeout});
    if (cli.command == "up") {
      const auto applied = migrator.Up();
      for (const int v : applied) spdlog::info("applied migration {}", v);
      const auto status = migrator.Status();
      spdlog::info("schema at version {}; {} migration(s) applied by this run", status.current_version,
                   applied.size());
      return 0;
    }
    const auto status = migrator.Status();
    for (const auto& m : status.applied) {
      std::cout << "applied  " << m.name << "  " << m.applied_at << "  " << m.checksum.substr(0, 12) << "\n";
    }
    for (const auto& m : status.pending) std::cout << "pending  " << m.name << "\n";
    std::cout << "version  " << status.current_version << "\n";
    return 0;
  } catch (const db::MigrationError& e) {
    spdlog::error("{}", e.what());
    return 1;
  }
}

}  // namespace charge_outbox::migrate
