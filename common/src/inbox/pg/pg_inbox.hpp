// PgInbox: the inbox's tables in the consumer's database (sql/inbox), on one connection owned by the
// consumer's thread. Each Apply is one transaction: lock the batch's partitions, plan each charge
// (ordering.hpp), run the handler, write the inbox rows, the held events, the gaps, the expired events and
// the rejected messages, commit. Internal to common/ (it exposes libpqxx).
#pragma once

#include <pqxx/pqxx>

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "charge_outbox/db/database.hpp"
#include "charge_outbox/inbox/inbox.hpp"

namespace charge_outbox::inbox {

struct RejectedMessage {
  std::string topic;
  int partition = 0;
  std::int64_t offset = 0;
  std::string reason;
  std::string key;
  std::string value;  // kept for a person, cut at kRejectedValueLimit bytes
};
inline constexpr std::size_t kRejectedValueLimit = 64 * 1024;
// An expired event's payload is kept for a person like a rejected message's value, cut as short.
inline constexpr std::size_t kExpiredPayloadLimit = kRejectedValueLimit;
// ExpiredCount counts no further: enough to say that a person has rows to look at, and cheap every sweep
// even after a replay of old data expired millions (the table has the exact number).
inline constexpr std::int64_t kExpiredCountLimit = 100'000;

// When an event is too old to apply (docs/inbox.md, "Retention"): it is then kept in inbox_expired.
struct EventExpiry {
  // By the record's timestamp (ce_time for a record without one), the time the topic's retention goes by:
  // the inbox's window, which must exceed the topic's retention.
  int retention_days = 14;
  // By the event's own time: its charge's progress, which recognises a re-delivery once the event's inbox
  // row is dropped, was last moved after that time and is kept this long after; past it, it may be gone.
  int progress_retention_days = 180;
};

struct BatchOutcome {
  std::int64_t applied = 0;
  std::int64_t duplicates = 0;  // arrived again: already applied, already held, or already in the inbox
  std::int64_t held = 0;        // newly held past a gap
  std::int64_t released = 0;    // applied from the held set
  std::int64_t gaps = 0;        // applied past a gap
  std::int64_t expired = 0;     // too old to apply (EventExpiry): newly kept in inbox_expired, not applied
  std::int64_t rejected = 0;
};

struct InboxRetention {
  int retention_days = 14;
  int progress_retention_days = 180;
  int partitions_ahead = 7;
  std::chrono::milliseconds lock_timeout{2'000};
};

struct RetentionReport {
  bool skipped = false;  // another consumer was running it
  int partitions_created = 0;
  std::vector<std::string> dropped;
  std::int64_t progress_forgotten = 0;
};

class PgInbox {
 public:
  PgInbox(std::string database_url, std::string application_name, db::ConnectionSettings settings);
  ~PgInbox();

  // Applies a batch read from `topic`: `events` in arrival order, `rejected` recorded for a person. Events
  // too old by `expiry` are not applied but kept in inbox_expired, in the same transaction.
  db::DbResult<BatchOutcome> Apply(std::string_view topic, const std::vector<ChargeEvent>& events,
                                   const std::vector<RejectedMessage>& rejected, EventHandler& handler,
                                   const GapOptions& gaps, const EventExpiry& expiry);
  // Applies held events whose wait is over (policy kApply), up to `limit` charges per call.
  db::DbResult<BatchOutcome> ReleaseDue(EventHandler& handler, const GapOptions& gaps, int limit);
  db::DbResult<std::int64_t> HeldCount();
  // The rows of inbox_expired, up to kExpiredCountLimit.
  db::DbResult<std::int64_t> ExpiredCount();
  db::DbResult<RetentionReport> RunRetention(const InboxRetention& policy);

 private:
  template <typename T, typename Job>
  db::DbResult<T> Run(Job job);
  db::DbResult<BatchOutcome> ApplyOnce(std::string_view topic, const std::vector<ChargeEvent>& events,
                                       const std::vector<RejectedMessage>& rejected, EventHandler& handler,
                                       const GapOptions& gaps, const EventExpiry& expiry, bool careful);
  // `careful`: the inbox insert skips ids already there (ON CONFLICT) instead of failing on them.
  // `extra_charges`: charges with held events to look at (from `extra_partitions`) besides the events'.
  BatchOutcome ApplyIn(pqxx::work& tx, const std::vector<const ChargeEvent*>& events,
                       std::vector<std::string> extra_charges, const std::vector<int>& extra_partitions,
                       EventHandler& handler, const GapOptions& gaps, bool careful);

  std::string connection_string_;
  std::unique_ptr<pqxx::connection> conn_;
};

}  // namespace charge_outbox::inbox
