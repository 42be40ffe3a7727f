#include "reconciler_daemon.hpp"

#include <spdlog/spdlog.h>
#include <unistd.h>

#include <cstdio>

#include "charge_outbox/log/log.hpp"
#include "command_line.hpp"
#include "reconciler_app.hpp"
#include "reconciler_config.hpp"
#include "run_summary.hpp"

namespace charge_outbox::reconciler {
namespace {

class ReconcilerDaemon final : public app::Daemon {
 public:
  ReconcilerDaemon() : app::Daemon({.name = "reconciler",
                                       .usage = kUsage,
                                       .failpoints = true,
                                       .required = "database.url acquirer.url acquirer.api_key"}) {}

  app::Settings Configure(const std::vector<std::string>& args, config::ConfigReader& reader) override {
    command_ = ParseCommandLine(args);
    config_ = LoadConfig(reader);
    return {.log_level = config_.log_level, .schema_database_url = config_.database_url};
  }

  // A report going to stdout must be the only thing there: log lines (and the summary) go to stderr
  // instead, and the report to a copy of the original stdout.
  void BeforeLogging() override {
    if (command_.command != CommandLine::Command::kWindow || !command_.output.empty()) return;
    report_fd_ = ::dup(STDOUT_FILENO);
    ::dup2(STDERR_FILENO, STDOUT_FILENO);
  }

  // Still one summary line, so a log-based alert on failed runs sees this one too.
  int StartFailed(const std::exception& error) override {
    spdlog::error("cannot start: {}", error.what());
    RunSummary failed;
    failed.mode = command_.command == CommandLine::Command::kWindow ? RunMode::kWindow : RunMode::kSweep;
    failed.errors = 1;
    log::Flush();
    std::fputs(SummaryLine(failed, std::chrono::system_clock::now()).c_str(), stdout);
    return kExitRunErrors;
  }

  int Run(const app::ShutdownSignals& signals) override {
    ReconcilerApp run(std::move(config_));
    switch (command_.command) {
      case CommandLine::Command::kSweep: return run.RunSweep(signals);
      case CommandLine::Command::kWindow: return run.RunWindow(command_, report_fd_);
    }
    return kExitRunErrors;
  }

 private:
  CommandLine command_;
  ReconcilerConfig config_;
  int report_fd_ = STDOUT_FILENO;
};

}  // namespace

std::unique_ptr<app::Daemon> MakeDaemon() { return std::make_unique<ReconcilerDaemon>(); }

}  // namespace charge_outbox::reconciler
