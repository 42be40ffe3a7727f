#include "charge_outbox/app/daemon.hpp"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <iostream>

#include "charge_outbox/db/migrations.hpp"
#include "charge_outbox/failpoints/failpoints.hpp"
#include "charge_outbox/log/log.hpp"

namespace charge_outbox::app {

CommandLine ParseCommandLine(const std::vector<std::string>& args, std::string_view usage) {
  CommandLine command;
  for (std::size_t i = 0; i < args.size(); ++i) {
    if (args[i] != "--config") {
      command.rest.push_back(args[i]);
      continue;
    }
    if (i + 1 >= args.size()) throw config::ConfigError("--config", "needs a value; " + std::string(usage));
    command.config_path = args[++i];
  }
  return command;
}

void Daemon::CheckSchema(const Settings& settings) {
  if (!settings.schema_database_url.empty()) {
    db::RequireSchemaVersion(settings.schema_database_url, db::EmbeddedSchemaVersion());
  }
}

int Daemon::StartFailed(const std::exception& error) {
  spdlog::error("{}", error.what());
  return 1;
}

int ConfigErrorAtStart(const std::exception& error) {
  std::cerr << error.what() << "\n";
  return config::kExitConfigError;
}

int CouldNotStart(const Profile& profile, std::string_view hint, const std::exception& error) {
  spdlog::error("{} could not start: {} ({})", profile.name, error.what(), hint);
  return 1;
}

std::string Help(const Profile& profile) {
  std::string text(profile.usage);
  if (text.empty() || text.back() != '\n') text += '\n';
  text += "\nSettings come from the YAML file given by --config (none: defaults), each overridden by its\n"
          "environment variable (the key upper-cased, dots as underscores). Required:\n";
  std::string_view rest = profile.required;
  bool any = false;
  while (!rest.empty()) {
    const auto end = rest.find(' ');
    const auto key = rest.substr(0, end);
    rest = end == std::string_view::npos ? std::string_view{} : rest.substr(end + 1);
    if (key.empty()) continue;
    const std::string padded = std::string(key) + std::string(key.size() < 28 ? 28 - key.size() : 1, ' ');
    text += "  " + padded + config::ConfigReader::EnvName(key) + "\n";
    any = true;
  }
  if (!any) text += "  (none)\n";
  text += "Every key, its default and its bounds: docs/configuration.md. A wrong key exits with status 2,\n"
          "naming it; --help exits 0.\n";
  return text;
}

int Main(const std::vector<std::string>& args, Daemon& daemon, std::ostream& err, std::ostream& out) {
  const auto& profile = daemon.profile();
  const bool help = std::find(args.begin(), args.end(), "--help") != args.end() || (!args.empty() && args[0] == "-h");
  if (help) {
    out << Help(profile);
    return out ? 0 : 1;
  }
  const auto signals = profile.signals ? ShutdownSignals() : ShutdownSignals::Unblocked();  // before any thread
  Settings settings;
  try {
    const auto command = ParseCommandLine(args, profile.usage);
    auto reader = config::ConfigReader::FromFile(command.config_path);
    settings = daemon.Configure(command.rest, reader);
    if (profile.failpoints) failpoints::ConfigureFromEnvironment();
  } catch (const config::ConfigError& e) {
    err << e.what() << "\n";
    return config::kExitConfigError;
  }
  daemon.BeforeLogging();
  log::Init(profile.name, settings.log_level);
  try {
    daemon.CheckSchema(settings);
  } catch (const std::exception& e) {
    const int status = daemon.StartFailed(e);
    log::Flush();
    return status;
  }
  const int status = daemon.Run(signals);
  log::Flush();
  return status;
}

int Main(int argc, char** argv, Daemon& daemon) {
  return Main({argv + 1, argv + argc}, daemon, std::cerr, std::cout);
}

}  // namespace charge_outbox::app
