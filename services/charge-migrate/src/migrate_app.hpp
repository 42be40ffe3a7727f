// charge-migrate: applies sql/migrations (compiled in) to the database, or reports where it stands.
#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <vector>

#include "charge_outbox/config/config.hpp"

namespace charge_outbox::migrate {

struct MigrateConfig {
  std::string database_url;  // secret: DATABASE_URL
  std::chrono::milliseconds lock_timeout{};
  std::string log_level;
};

MigrateConfig LoadConfig(config::ConfigReader& reader);

inline constexpr const char* kUsage = "usage: charge-migrate [--config PATH] [--migrations-dir DIR] up|status";

// The command line after `--config PATH`, which the start-up path (app::ParseCommandLine) takes out first.
struct CommandLine {
  std::string command;          // "up" or "status"
  std::string migrations_dir;   // empty: the migrations compiled into the binary
};

// Throws ConfigError (key "argv", or "--migrations-dir" without its value) on a bad command line.
CommandLine ParseCommandLine(const std::vector<std::string>& args);

// Returns the process exit status: 0 done, 1 failed (the message says why and what to do).
int Run(const CommandLine& cli, const MigrateConfig& config);

}  // namespace charge_outbox::migrate
