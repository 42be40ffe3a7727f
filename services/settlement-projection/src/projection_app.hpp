// ProjectionApp: wires settlement-projection together: the inbox consumer on a thread of its own (the
// CapturedTotals handler), the query API over the projection's tables, and the admin server for
// /healthz, /readyz and /metrics.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <utility>

#include "projection_config.hpp"

namespace charge_outbox::settlement {

// The projection's own tables, in the ledger schema_migrations of its database (the inbox's are in
// inbox::kInboxLedger).
const std::vector<db::Migration>& ProjectionMigrations();

// Applies the inbox's migrations, then the projection's: `settlement-projection migrate`.
int Migrate(const ProjectionConfig& config);

// Lifecycle: construct (throws inbox::InboxConfigError on a bad Kafka property), Start() once, Stop() once.
class ProjectionApp {
 public:
  explicit ProjectionApp(ProjectionConfig config);
  ~ProjectionApp();

  // Starts the consumer and both servers; returns the bound ports (API, admin).
  std::pair<std::uint16_t, std::uint16_t> Start();
  // Stops the consumer (it applies and commits what it read, then leaves the group), then the servers.
  void Stop(std::chrono::milliseconds drain);
  // The consumer's exit status once it ended on its own (a fatal Kafka error), else nullopt.
  std::optional<int> Finished() const;

 private:
  struct Parts;
  std::unique_ptr<Parts> parts_;
};

}  // namespace charge_outbox::settlement
