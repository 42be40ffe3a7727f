// A PostgreSQL server of a test's own, for tests that stop, kill or restart it: never the shared server at
// TEST_DATABASE_URL, which every other suite uses at the same time. Started by the local stack's own
// functions (deploy/local/lib/postgres.sh: pg_start, pg_stop), from a fresh data directory on a free
// loopback port, without fsync (a throwaway cluster). Header-only, like charge_stack.hpp.
#pragma once

#include <chrono>
#include <filesystem>
#include <ostream>
#include <stdexcept>
#include <string>
#include <system_error>

#include "child_process.hpp"
#include "test_env.hpp"

namespace charge_outbox::testing {

class OwnPostgres {
 public:
  // How the server goes down in Restart: `fast` (pg_ctl -m fast: each session is sent FATAL 57P01 and
  // closed) or `immediate` (-m immediate: the backends quit at once, the next start recovers from WAL).
  enum class Shutdown { kFast, kImmediate };

  // Starts a server; `project_root` is the source tree (its deploy/local/lib).
  OwnPostgres(std::string project_root, const std::string& name)
      : root_(std::move(project_root)),
        state_(std::filesystem::temp_directory_path() / UniqueName(name)),
        port_(FreeLoopbackPort()) {
    std::filesystem::create_directories(state_);
    // As root, the server runs as `postgres`, which must reach its directory under ours.
    std::filesystem::permissions(state_, std::filesystem::perms::owner_all | std::filesystem::perms::group_read |
                                             std::filesystem::perms::group_exec |
                                             std::filesystem::perms::others_read |
                                             std::filesystem::perms::others_exec);
    Shell("pg_start " + state_.string() + " " + std::to_string(port_) + " fast");
  }
  ~OwnPostgres() {
    try {
      Shell("pg_stop " + state_.string());
    } catch (const std::exception&) {
      // Already down: nothing to stop.
    }
    std::error_code ignored;
    std::filesystem::remove_all(state_, ignored);
  }
  OwnPostgres(const OwnPostgres&) = delete;
  OwnPostgres& operator=(const OwnPostgres&) = delete;

  int port() const { return port_; }
  std::string url(const std::string& db = "postgres") const {
    return "postgresql://postgres@127.0.0.1:" + std::to_string(port_) + "/" + db;
  }

  // Stops the server as `how` says and starts it again, same data and port, after `down_for` (an outage
  // longer than a restart's); returns once it accepts connections (pg_ctl -w).
  void Restart(Shutdown how, std::chrono::seconds down_for = std::chrono::seconds{0}) {
    const std::string data = state_.string() + "/postgres/data";
    const std::string mode = how == Shutdown::kFast ? "fast" : "immediate";
    const std::string pause = down_for.count() > 0 ? "sleep " + std::to_string(down_for.count()) + " && " : "";
    Shell("_pg_as_owner \"$PG_BIN/pg_ctl\" -D " + data + " -m " + mode + " -w -t 30 stop >/dev/null && " + pause +
          "pg_start " + state_.string() + " " + std::to_string(port_) + " fast");
  }

  // Runs `script` in bash with the local stack's libraries sourced; throws with its output if it fails.
  std::string Shell(const std::string& script) const {
    const std::string lib = root_ + "/deploy/local/lib";
    const auto r = RunProcess({"/bin/bash", "-c",
                               "set -euo pipefail; source " + lib + "/common.sh; source " + lib + "/postgres.sh; " +
                                   script},
                              {}, std::chrono::seconds{120});
    if (r.exit_code != 0) throw std::runtime_error("`" + script + "` failed:\n" + r.out + r.err);
    return r.out;
  }

 private:
  std::string root_;
  std::filesystem::path state_;
  int port_;
};

// One way a test's server goes away, as a test parameter: how it stops, and how long it stays down (0: it
// starts again at once; longer: an outage as long as a failover).
struct PgOutage {
  OwnPostgres::Shutdown how = OwnPostgres::Shutdown::kFast;
  std::chrono::seconds down_for{0};

  // "Fast", "Immediate", "ImmediateDown8s": the test name's suffix.
  std::string Name() const {
    return std::string(how == OwnPostgres::Shutdown::kFast ? "Fast" : "Immediate") +
           (down_for.count() > 0 ? "Down" + std::to_string(down_for.count()) + "s" : "");
  }
};
inline void PrintTo(const PgOutage& outage, std::ostream* os) { *os << outage.Name(); }

}  // namespace charge_outbox::testing
