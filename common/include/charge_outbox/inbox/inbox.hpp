// The inbox: consumes charge-events and applies each event exactly once, in sequence order per charge,
// to a handler's tables in the consumer's own PostgreSQL. At least once in, exactly once out: the
// handler's effects and the inbox rows commit in one transaction, and the Kafka offsets are committed
// only after it, so a crash, a rebalance or a re-delivery leads to a duplicate the inbox recognises,
// never to an effect lost or applied twice. Design and policies: docs/inbox.md.
//
//   EventHandler   what the consumer does with events (its projection), inside the inbox's transaction
//   InboxOptions   where to read, where to write, batch size, gap policy, retention (LoadInboxOptions)
//   InboxProbe     the inbox_* metrics
//   InboxConsumer  the loop: poll a batch, apply it, commit offsets; held events and retention between
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "charge_outbox/db/database.hpp"
#include "charge_outbox/db/migrations.hpp"
#include "charge_outbox/db/text_query.hpp"
#include "charge_outbox/inbox/charge_event.hpp"
#include "charge_outbox/inbox/ordering.hpp"
#include "charge_outbox/metrics/metrics.hpp"
#include "charge_outbox/retry/backoff.hpp"

namespace charge_outbox::config {
class ConfigReader;
}

namespace charge_outbox::inbox {

// The inbox's tables (sql/inbox), recorded in their own ledger so a consumer's migrations keep theirs.
const std::vector<db::Migration>& InboxMigrations();
inline constexpr const char* kInboxLedger = "inbox_schema_migrations";

class EventHandler {
 public:
  virtual ~EventHandler() = default;
  // Applies `events` inside the inbox's transaction: each charge's in sequence order, never one twice,
  // charges in no particular order. What it writes commits with the inbox rows or not at all. It throws
  // only when the database fails (db::DbException): the batch is then rolled back and tried again. An
  // event it has no use for (a type it does not handle) it ignores.
  virtual void Apply(db::TextTransaction& tx, const std::vector<const ChargeEvent*>& events) = 0;
};

struct InboxOptions {
  std::string database_url;
  db::ConnectionSettings database;
  std::string application_name;

  std::string bootstrap_servers;
  std::string topic = "charge-events";
  std::string group_id;
  // librdkafka consumer properties (security.protocol, sasl.*, ssl.*, client.id, ...), applied before
  // the ones the inbox depends on, which always win: enable.auto.commit=false,
  // enable.auto.offset.store=false.
  std::map<std::string, std::string> kafka_properties;

  std::string major_suffix = ".v1";  // the event types read; others are counted and skipped
  // How many InboxConsumers a process runs, each with its own Kafka consumer (in the group) and database
  // connection: a PostgreSQL session uses one core, so one consumer cannot use more than that.
  int consumers = 2;
  GapOptions gaps;
  int max_batch = 5000;                            // messages applied in one transaction at most
  std::chrono::milliseconds poll_timeout{100};     // how long one poll waits for the first message
  // After a failed transaction: 200 ms doubling up to 5 s, unjittered (retry/backoff.hpp says why).
  retry::BackoffOptions backoff{std::chrono::milliseconds{200}, std::chrono::milliseconds{5'000}};
  std::chrono::milliseconds sweep_interval{1'000};  // how often held events are looked at
  // Days of inbox rows kept, by the event's time; an event whose Kafka record is older than this is
  // expired: not applied, kept in inbox_expired (docs/inbox.md, "Retention"). Must exceed the topic's.
  int retention_days = 14;
  // How long a charge's last sequence is kept after its last event; an event whose own time is older
  // is expired too: its charge's progress may be gone.
  int progress_retention_days = 180;
  int partitions_ahead = 7;
  std::chrono::milliseconds retention_interval{std::chrono::minutes{10}};
};

// Reads the `inbox.*` and `kafka.*` keys and database.url; throws config::ConfigError naming a bad one.
InboxOptions LoadInboxOptions(config::ConfigReader& reader, std::string application_name);

// The inbox_* metrics, shared by the process's consumers. Lives as long as the registry's exposer.
class InboxProbe {
 public:
  explicit InboxProbe(metrics::Registry& registry);

  void Outcomes(std::int64_t applied, std::int64_t duplicates, std::int64_t held, std::int64_t released,
                std::int64_t rejected, std::int64_t other_version, std::int64_t expired);
  void Gaps(std::int64_t count);
  void BatchApplied(std::chrono::duration<double> took);
  void BatchFailed();
  void CommitFailed();
  // Lag and assignment are the process's, the sum over its consumers: each reports its own changes.
  void LagChanged(std::int64_t delta);
  void Held(std::int64_t events);
  void ExpiredKept(std::int64_t events);  // the rows of inbox_expired
  void AssignedChanged(std::int64_t delta);

 private:
  prometheus::Family<prometheus::Counter>& events_;
  prometheus::Counter& applied_;
  prometheus::Counter& duplicates_;
  prometheus::Counter& held_;
  prometheus::Counter& released_;
  prometheus::Counter& rejected_;
  prometheus::Counter& other_version_;
  prometheus::Counter& expired_;
  prometheus::Counter& gaps_;
  prometheus::Counter& batch_failures_;
  prometheus::Counter& commit_failures_;
  prometheus::Histogram& batch_seconds_;
  prometheus::Gauge& lag_;
  prometheus::Gauge& held_now_;
  prometheus::Gauge& expired_kept_;
  prometheus::Gauge& assigned_;
};

// What /healthz and /readyz look at.
struct InboxStatus {
  std::chrono::steady_clock::time_point last_turn;  // the loop's last pass
  bool database_ok = false;                         // the last transaction committed
  std::int64_t assigned_partitions = 0;
};

// Thrown by the constructor when a Kafka property is unknown or invalid (a config error, exit 2).
class InboxConfigError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// One member of the consumer group with its own database connection. A process that wants more runs
// several (InboxOptions::consumers), each on a thread of its own, all sharing one handler and probe.
class InboxConsumer {
 public:
  InboxConsumer(InboxOptions options, EventHandler& handler, InboxProbe& probe);
  ~InboxConsumer();
  InboxConsumer(const InboxConsumer&) = delete;
  InboxConsumer& operator=(const InboxConsumer&) = delete;

  // Consumes until `stop` is set, then commits what it applied and leaves the group. Call once, on a
  // thread of its own (it blocks on Kafka and the database). Returns 0, or 1 after a fatal Kafka error.
  int Run(const std::atomic<bool>& stop);

  InboxStatus Status() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace charge_outbox::inbox
