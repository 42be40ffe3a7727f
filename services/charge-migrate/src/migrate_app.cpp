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
  return c;
}

CommandLine ParseCommandLine(const std::vector<std::string>& args) {
  constexpr const char* kUsage = "usage: charge-migrate [--config PATH] [--migrations-dir DIR] up|status";
  CommandLine cli;
  for (std::size_t i = 0; i < args.size(); ++i) {
    const auto& arg = args[i];
    if (arg == "--config" || arg == "--migrations-dir") {
      if (i + 1 >= args.size()) throw config::ConfigError(arg, std::string("needs a value; ") + kUsage);
      (arg == "--config" ? cli.config_path : cli.migrations_dir) = args[++i];
    } else if ((arg == "up" || arg == "status") && cli.command.empty()) {
      cli.command = arg;
    } else {
      throw config::ConfigError("argv", "unexpected argument \"" + arg + "\"; " + kUsage);
    }
  }
  if (cli.command.empty()) throw config::ConfigError("argv", std::string("missing command; ") + kUsage);
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
