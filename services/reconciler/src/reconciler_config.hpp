// The reconciler's configuration: every key, its default and its checks, read once at start-up.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>

#include "charge_outbox/acquirer/http_acquirer_client.hpp"
#include "charge_outbox/config/config.hpp"
#include "charge_outbox/db/database.hpp"
#include "decision.hpp"

namespace charge_outbox::reconciler {

struct SweepOptions {
  std::chrono::milliseconds grace_period{std::chrono::minutes{2}};  // only charges older than this
  int batch_size = 100;                                              // charges claimed per statement
  int concurrency = 8;                                               // charges worked on at once
  std::chrono::milliseconds time_budget{std::chrono::seconds{50}};   // no new charge is started after this
  // How long a claim keeps charge-api and other runs away. It must outlast the work on one charge (up to
  // two acquirer operations under the retry policy), or a live claim could expire mid-work.
  std::chrono::milliseconds claim_lease{std::chrono::seconds{90}};
  DecisionOptions decision;
};

// `reconciler window`'s own keys.
struct WindowReportOptions {
  // Past this many captures in the acquirer's listing (or captured charges of ours in the window) the
  // report stops judging: incomplete, nothing flagged. Bounds the run's memory with the window.
  std::int64_t max_captures = 1'000'000;
};

struct PushgatewayOptions {
  std::string url;  // http://host:port; empty: metrics are only logged
  std::string job = "reconciler";
};

struct ReconcilerConfig {
  std::string database_url;  // secret: DATABASE_URL
  db::DatabaseOptions database;  // database.pool_size (reconciler.concurrency + 2) and the database.* timeouts
  acquirer::AcquirerClientConfig acquirer;
  SweepOptions sweep;
  WindowReportOptions window;
  PushgatewayOptions pushgateway;
  std::string instance_id;  // names this run's lease owner, with a fresh uuid per run
  std::string log_level = "info";
};

// Reads every key (see services/reconciler/README.md); throws config::ConfigError naming the first bad one.
ReconcilerConfig LoadConfig(config::ConfigReader& reader);

}  // namespace charge_outbox::reconciler
