// reconciler: one run of the CronJob that finds the truth about pending charges at the acquirer, or a
// window report (`reconciler window --from T --to T` or `--last 1h`). See README.md.
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <cstdio>
#include <iostream>
#include <vector>

#include "charge_outbox/app/shutdown.hpp"
#include "charge_outbox/config/config.hpp"
#include "charge_outbox/db/migrations.hpp"
#include "charge_outbox/failpoints/failpoints.hpp"
#include "charge_outbox/log/log.hpp"
#include "command_line.hpp"
#include "reconciler_app.hpp"
#include "run_summary.hpp"

int main(int argc, char** argv) {
  using namespace charge_outbox;
  app::ShutdownSignals signals;  // before any thread starts

  reconciler::CommandLine command;
  reconciler::ReconcilerConfig config;
  try {
    command = reconciler::ParseCommandLine(std::vector<std::string>(argv + 1, argv + argc));
    auto reader = config::ConfigReader::FromFile(command.config_path);
    config = reconciler::LoadConfig(reader);
    failpoints::ConfigureFromEnvironment();
  } catch (const config::ConfigError& e) {
    std::cerr << e.what() << "\n";
    return config::kExitConfigError;
  }

  // A report on stdout must be the only thing there: log lines (and the summary) go to stderr instead.
  int report_fd = STDOUT_FILENO;
  const bool report_on_stdout = command.command == reconciler::CommandLine::Command::kWindow && command.output.empty();
  if (report_on_stdout) {
    report_fd = ::dup(STDOUT_FILENO);
    ::dup2(STDERR_FILENO, STDOUT_FILENO);
  }
  log::Init("reconciler", config.log_level);

  try {
    db::RequireSchemaVersion(config.database_url, db::EmbeddedSchemaVersion());
  } catch (const std::exception& e) {
    // Still one summary line, so a log-based alert on failed runs sees this one too.
    spdlog::error("cannot start: {}", e.what());
    reconciler::RunSummary failed;
    failed.mode = command.command == reconciler::CommandLine::Command::kWindow ? reconciler::RunMode::kWindow
                                                                              : reconciler::RunMode::kSweep;
    failed.errors = 1;
    log::Flush();
    std::fputs(reconciler::SummaryLine(failed, std::chrono::system_clock::now()).c_str(), stdout);
    return reconciler::kExitRunErrors;
  }

  reconciler::ReconcilerApp app(std::move(config));
  switch (command.command) {
    case reconciler::CommandLine::Command::kSweep: return app.RunSweep(signals);
    case reconciler::CommandLine::Command::kWindow:
      return app.RunWindow(command, report_fd);
  }
  return reconciler::kExitRunErrors;
}
