// The one start-up path of every daemon. Its main() names the daemon and hands it to app::Main:
//
//   int main(int argc, char** argv) {
//     charge_outbox::charge_api::ChargeApiDaemon daemon;  // what is particular to charge-api
//     return charge_outbox::app::Main(argc, argv, daemon);  // what every daemon does, in this order:
//   }
//
//   1. blocks SIGTERM and SIGINT (ShutdownSignals), before any thread exists (unless the profile says not);
//   1b. `--help` anywhere (or `-h` first): Help(profile) on stdout, exit 0, nothing else done;
//   2. takes `--config PATH` out of the command line (wherever it stands); the rest, a subcommand and its
//      flags, is the daemon's to read;
//   3. daemon.Configure(rest, reader), which returns the Settings below: a config::ConfigError (a bad
//      argument, a bad or unknown key) is one line on stderr and exit status config::kExitConfigError (2);
//   4. failpoints from the FAILPOINTS variable, for a daemon whose profile says so (a bad spec exits 2 too);
//   5. daemon.BeforeLogging(), then log::Init(profile name, the settings' log level);
//   6. daemon.CheckSchema(settings): whatever it throws (the schema is behind this build, the database does not
//      answer) goes to daemon.StartFailed, whose return is the exit status (by default: logged, 1);
//   7. daemon.Run(signals), whose return is the exit status (0, 1, or kExitShutdownOverrun from
//      StopWithin); then log::Flush.
#pragma once

#include <exception>
#include <iosfwd>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "charge_outbox/app/shutdown.hpp"
#include "charge_outbox/config/config.hpp"

namespace charge_outbox::app {

// The command line every daemon shares: `[--config PATH]` anywhere, and the rest, in order.
struct CommandLine {
  std::string config_path;        // empty: no file, the environment and the defaults only
  std::vector<std::string> rest;  // the daemon's subcommand and its flags
};

// Throws config::ConfigError (key "--config") when --config has no value; `usage` ends that message.
CommandLine ParseCommandLine(const std::vector<std::string>& args, std::string_view usage);

// What a daemon tells the start-up path about itself before anything runs.
struct Profile {
  std::string_view name;   // the component in every log line, and the binary's name
  std::string_view usage;  // "usage: NAME [--config PATH] ...", quoted by command line errors
  bool failpoints = false;  // reads FAILPOINTS (the daemons the crash and chaos tests break)
  bool signals = true;      // false: SIGTERM and SIGINT are not blocked (ShutdownSignals::Unblocked)
  // The keys it cannot start without, space-separated ("database.url acquirer.url"): --help lists them
  // with their environment variables.
  std::string_view required;
};

// What --help prints: the usage, the required keys with their environment variables, and where every
// key is documented.
std::string Help(const Profile& profile);

// What the start-up path needs from a daemon's configuration.
struct Settings {
  std::string log_level;  // one of log::kLevels
  // The database whose schema must be this build's (db::EmbeddedSchemaVersion()) before the daemon runs;
  // empty: nothing is checked (unless the daemon's CheckSchema does it its own way).
  std::string schema_database_url;
};

class Daemon {
 public:
  explicit Daemon(Profile profile) : profile_(profile) {}
  virtual ~Daemon() = default;
  Daemon(const Daemon&) = delete;
  Daemon& operator=(const Daemon&) = delete;

  const Profile& profile() const noexcept { return profile_; }

  // Reads the command line's rest (without --config) and the configuration. Throws config::ConfigError
  // naming the argument ("argv") or the key at fault.
  virtual Settings Configure(const std::vector<std::string>& args, config::ConfigReader& reader) = 0;
  // Runs before the log is set up: where a daemon arranges its output streams.
  virtual void BeforeLogging() {}
  // Refuses to start against a database whose schema this build does not match (throws). By default:
  // settings.schema_database_url, if any, must be at db::EmbeddedSchemaVersion().
  virtual void CheckSchema(const Settings& settings);
  // The exit status after CheckSchema threw; by default the error is logged and the status is 1.
  virtual int StartFailed(const std::exception& error);
  // The daemon's work: until a signal, or one run, or one subcommand. Returns the exit status.
  virtual int Run(const ShutdownSignals& signals) = 0;

 private:
  Profile profile_;
};

// StartAndServe's (below) two failures: the message on stderr and config::kExitConfigError; logged and 1.
int ConfigErrorAtStart(const std::exception& error);
int CouldNotStart(const Profile& profile, std::string_view hint, const std::exception& error);

// The run of a daemon that serves until SIGTERM/SIGINT or until it ends by itself (outbox-relay,
// settlement-projection): constructs Service from `args` and calls Start(), then RunUntilSignal with its
// Stop(drain) and Finished(). A ConfigErrorT from either (a Kafka property librdkafka refuses) is one line
// on stderr and exit config::kExitConfigError; any other exception (a port in use) is logged as
// "NAME could not start: WHAT (HINT)" and exit 1.
template <class Service, class ConfigErrorT, class... Args>
int StartAndServe(const ShutdownSignals& signals, std::chrono::milliseconds deadline, const Profile& profile,
                  std::string_view hint, Args&&... args) {
  std::unique_ptr<Service> service;
  try {
    service = std::make_unique<Service>(std::forward<Args>(args)...);
    service->Start();
  } catch (const ConfigErrorT& e) {
    return ConfigErrorAtStart(e);
  } catch (const std::exception& e) {
    return CouldNotStart(profile, hint, e);
  }
  return RunUntilSignal(
      signals, deadline, [&](std::chrono::milliseconds drain) { service->Stop(drain); },
      [&] { return service->Finished(); });
}

// The start-up path above; `args` is argv without the program name. Configuration errors go to `err`,
// --help to `out`.
int Main(const std::vector<std::string>& args, Daemon& daemon, std::ostream& err, std::ostream& out);
// The same, with main()'s arguments and std::cerr.
int Main(int argc, char** argv, Daemon& daemon);

}  // namespace charge_outbox::app
