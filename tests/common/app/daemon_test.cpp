// The start-up path every daemon's main() takes (app::Main), driven with a fake daemon that records what
// it was asked to do.
#include "charge_outbox/app/daemon.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <pthread.h>
#include <unistd.h>

#include <algorithm>
#include <csignal>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>

#include "charge_outbox/failpoints/failpoints.hpp"

namespace charge_outbox::app {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

class FakeDaemon final : public Daemon {
 public:
  explicit FakeDaemon(Profile profile = {.name = "fake", .usage = "usage: fake [--config PATH] [thing]"})
      : Daemon(profile) {}

  Settings Configure(const std::vector<std::string>& args, config::ConfigReader& reader) override {
    steps.push_back("configure");
    args_seen = args;
    if (args.size() > 1) throw config::ConfigError("argv", std::string(profile().usage));
    port = reader.Integer("fake.port", 8080, 1, 65535);
    reader.RejectUnknownKeys();
    return {.log_level = "warn", .schema_database_url = schema_database_url};
  }
  void BeforeLogging() override { steps.push_back("before logging"); }
  void CheckSchema(const Settings& settings) override {
    steps.push_back("check schema");
    if (schema_behind) throw std::runtime_error("schema is at version 3 but this build needs 4");
    Daemon::CheckSchema(settings);
  }
  int Run(const ShutdownSignals& signals) override {
    steps.push_back("run");
    if (raise_sigterm_in_run) {
      ::raise(SIGTERM);  // blocked by Main: it waits to be taken instead of ending the test
      signal_taken = signals.WaitFor(std::chrono::seconds{1});
    }
    sigset_t mask;
    pthread_sigmask(SIG_BLOCK, nullptr, &mask);
    sigterm_blocked_in_run = sigismember(&mask, SIGTERM) == 1;
    return run_status;
  }

  std::vector<std::string> steps;
  std::vector<std::string> args_seen;
  std::int64_t port = 0;
  bool schema_behind = false;
  std::string schema_database_url;  // empty: the default schema check checks nothing
  bool raise_sigterm_in_run = false;
  std::optional<int> signal_taken;
  bool sigterm_blocked_in_run = false;
  int run_status = 0;
};

// What a test does not read of stdout.
std::ostream& Stdout() {
  static std::ostringstream ignored;
  return ignored;
}

class ConfigFile {
 public:
  explicit ConfigFile(const std::string& yaml)
      : path_(std::filesystem::temp_directory_path() / ("daemon_test_" + std::to_string(::getpid()) + ".yaml")) {
    std::ofstream(path_) << yaml;
  }
  ~ConfigFile() { std::filesystem::remove(path_); }
  std::string path() const { return path_.string(); }

 private:
  std::filesystem::path path_;
};

TEST(AppParseCommandLine, TakesConfigFromAnywhereAndKeepsTheRestInOrder) {
  auto command = ParseCommandLine({"parked", "--config", "/etc/r.yaml", "list", "5"}, "usage");
  EXPECT_EQ(command.config_path, "/etc/r.yaml");
  EXPECT_THAT(command.rest, ElementsAre("parked", "list", "5"));
  command = ParseCommandLine({}, "usage");
  EXPECT_EQ(command.config_path, "");
  EXPECT_THAT(command.rest, IsEmpty());
}

TEST(AppParseCommandLine, ConfigWithoutAValueNamesTheFlagAndTheUsage) {
  try {
    ParseCommandLine({"sweep", "--config"}, "usage: fake [--config PATH]");
    FAIL() << "accepted";
  } catch (const config::ConfigError& e) {
    EXPECT_EQ(e.key(), "--config");
    EXPECT_THAT(e.problem(), HasSubstr("needs a value; usage: fake [--config PATH]"));
  }
}

TEST(AppMain, RunsTheStepsInOrderAndReturnsRunsStatus) {
  const ConfigFile file("fake:\n  port: 9000\n");
  FakeDaemon daemon;
  daemon.run_status = 7;
  std::ostringstream err;
  EXPECT_EQ(Main({"--config", file.path(), "thing"}, daemon, err, Stdout()), 7);
  EXPECT_THAT(daemon.steps, ElementsAre("configure", "before logging", "check schema", "run"));
  EXPECT_THAT(daemon.args_seen, ElementsAre("thing"));
  EXPECT_EQ(daemon.port, 9000);
  EXPECT_EQ(err.str(), "");
}

TEST(AppMain, ABadKeyIsOneLineOnStderrAndExitTwoWithoutRunning) {
  const ConfigFile file("fake:\n  port: 70000\n");
  FakeDaemon daemon;
  std::ostringstream err;
  EXPECT_EQ(Main({"--config", file.path()}, daemon, err, Stdout()), config::kExitConfigError);
  EXPECT_EQ(config::kExitConfigError, 2);
  const auto message = err.str();
  EXPECT_THAT(message, HasSubstr("fake.port"));
  EXPECT_EQ(std::count(message.begin(), message.end(), '\n'), 1);
  EXPECT_THAT(daemon.steps, ElementsAre("configure"));
}

TEST(AppMain, AnUnknownKeyExitsTwoNamingIt) {
  const ConfigFile file("fake:\n  prot: 9000\n");
  FakeDaemon daemon;
  std::ostringstream err;
  EXPECT_EQ(Main({"--config", file.path()}, daemon, err, Stdout()), config::kExitConfigError);
  EXPECT_THAT(err.str(), HasSubstr("fake.prot"));
}

TEST(AppMain, CommandLineErrorsExitTwoWithTheUsage) {
  FakeDaemon daemon;
  std::ostringstream err;
  EXPECT_EQ(Main({"thing", "other"}, daemon, err, Stdout()), config::kExitConfigError);
  EXPECT_THAT(err.str(), HasSubstr("usage: fake"));
  std::ostringstream missing;
  EXPECT_EQ(Main({"--config"}, daemon, missing, Stdout()), config::kExitConfigError);
  EXPECT_THAT(missing.str(), HasSubstr("--config: needs a value"));
  std::ostringstream absent;
  EXPECT_EQ(Main({"--config", "/nonexistent/fake.yaml"}, daemon, absent, Stdout()), config::kExitConfigError);
  // Only the first got as far as Configure: a flag without its value, or a file that is not there, stop
  // the start before it.
  EXPECT_THAT(daemon.steps, ElementsAre("configure"));
}

TEST(AppMain, HelpPrintsTheUsageAndTheRequiredKeysOnStdoutAndExitsZeroWithoutConfiguring) {
  FakeDaemon daemon({.name = "fake", .usage = "usage: fake [--config PATH] [thing]",
                     .required = "database.url acquirer.api_key"});
  for (const std::vector<std::string>& args :
       {std::vector<std::string>{"--help"}, {"-h"}, {"thing", "--help"}, {"--config", "/nonexistent.yaml", "--help"}}) {
    std::ostringstream out, err;
    EXPECT_EQ(Main(args, daemon, err, out), 0) << args.front();
    EXPECT_THAT(out.str(), HasSubstr("usage: fake [--config PATH] [thing]"));
    EXPECT_THAT(out.str(), HasSubstr("database.url"));
    EXPECT_THAT(out.str(), HasSubstr("DATABASE_URL"));
    EXPECT_THAT(out.str(), HasSubstr("ACQUIRER_API_KEY"));
    EXPECT_THAT(out.str(), HasSubstr("docs/configuration.md"));
    EXPECT_EQ(err.str(), "");
  }
  EXPECT_THAT(daemon.steps, IsEmpty()) << "help configures nothing and runs nothing";
  std::ostringstream none;
  FakeDaemon plain;
  EXPECT_EQ(Main({"--help"}, plain, none, none), 0);
  EXPECT_THAT(none.str(), HasSubstr("(none)"));
}

TEST(AppMain, ASchemaCheckThatThrowsExitsOneWithoutRunning) {
  FakeDaemon daemon;
  daemon.schema_behind = true;
  std::ostringstream err;
  EXPECT_EQ(Main({}, daemon, err, Stdout()), 1);
  EXPECT_THAT(daemon.steps, ElementsAre("configure", "before logging", "check schema"));
}

TEST(AppMain, TheDefaultSchemaCheckReadsTheDatabaseTheSettingsName) {
  FakeDaemon daemon;
  // Nothing listens on port 1: the check cannot read the schema, so the daemon must not run.
  daemon.schema_database_url = "postgresql://charge@127.0.0.1:1/charges?connect_timeout=2";
  std::ostringstream err;
  EXPECT_EQ(Main({}, daemon, err, Stdout()), 1);
  EXPECT_THAT(daemon.steps, ElementsAre("configure", "before logging", "check schema"));

  FakeDaemon unchecked;  // no database named: nothing to check, it runs
  EXPECT_EQ(Main({}, unchecked, err, Stdout()), 0);
  EXPECT_THAT(unchecked.steps, ElementsAre("configure", "before logging", "check schema", "run"));
}

TEST(AppMain, StartFailedChoosesTheStatusAfterAFailedSchemaCheck) {
  class Reporting final : public Daemon {
   public:
    Reporting() : Daemon({.name = "reporting", .usage = "usage: reporting"}) {}
    Settings Configure(const std::vector<std::string>&, config::ConfigReader&) override {
      return {.log_level = "error"};
    }
    void CheckSchema(const Settings&) override { throw std::runtime_error("database does not answer"); }
    int StartFailed(const std::exception& error) override {
      seen = error.what();
      return 5;
    }
    int Run(const ShutdownSignals&) override { return 0; }
    std::string seen;
  } daemon;
  std::ostringstream err;
  EXPECT_EQ(Main({}, daemon, err, Stdout()), 5);
  EXPECT_EQ(daemon.seen, "database does not answer");
}

TEST(AppMain, SignalsAreBlockedBeforeRunSoRunCanWaitForThem) {
  FakeDaemon daemon;
  daemon.raise_sigterm_in_run = true;
  std::ostringstream err;
  EXPECT_EQ(Main({}, daemon, err, Stdout()), 0);
  EXPECT_TRUE(daemon.sigterm_blocked_in_run);
  EXPECT_EQ(daemon.signal_taken, SIGTERM);
}

TEST(AppMain, AProfileWithoutSignalsLeavesThemAtTheirDefault) {
  FakeDaemon daemon({.name = "one-shot", .usage = "usage: one-shot", .signals = false});
  std::ostringstream err;
  EXPECT_EQ(Main({}, daemon, err, Stdout()), 0);
  EXPECT_FALSE(daemon.sigterm_blocked_in_run);
}

TEST(AppMain, FailpointsAreReadOnlyWhenTheProfileSaysSo) {
  ::setenv("FAILPOINTS", "no such syntax", 1);
  FakeDaemon with({.name = "breakable", .usage = "usage: breakable", .failpoints = true});
  std::ostringstream err;
  EXPECT_EQ(Main({}, with, err, Stdout()), config::kExitConfigError);
  EXPECT_THAT(err.str(), HasSubstr("FAILPOINTS"));
  FakeDaemon without;
  std::ostringstream quiet;
  EXPECT_EQ(Main({}, without, quiet, Stdout()), 0);
  EXPECT_EQ(quiet.str(), "");
  ::unsetenv("FAILPOINTS");
  failpoints::Configure("");
}

}  // namespace
}  // namespace charge_outbox::app
