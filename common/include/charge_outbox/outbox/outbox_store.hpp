// Outbox store: every statement on the `outbox` table except the inserts the charge store makes with
// each state change. Two roles, each on a dedicated PostgreSQL session of its own:
//
//   RelaySession   what one relay replica does: membership, shard ownership (session advisory locks),
//                  LISTEN for new events, claiming the next events of its shards, marking them published,
//                  parking poison rows.
//   OutboxAdmin    what anybody may do: backlog figures for the lag gauge, partitions and retention, and
//                  the parked-row commands (list, retry, skip).
//
// Both are synchronous: the relay is one loop on one thread, and a session holding advisory locks must
// stay one connection for its whole life (a pool would hand statements to other sessions). No libpqxx
// type crosses this header. Design and ordering proof: docs/outbox-relay.md.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "charge_outbox/db/database.hpp"

namespace charge_outbox::outbox {

using db::DbErrc;
using db::DbError;
using db::DbResult;

inline constexpr int kShardCount = 256;  // outbox_shard() in migration 0002

// One unpublished event, as the relay needs it to build a Kafka message.
struct OutboxEvent {
  std::string id;           // uuid: ce_id
  std::string aggregateid;  // charge id: the Kafka key and ce_subject
  std::string type;         // ce_type
  std::string payload;      // JSON text: the Kafka value
  int sequence = 0;
  int shard = 0;
  std::int64_t position = 0;
  std::string traceparent;  // empty when the row has none
  std::string producer;     // the daemon that wrote the row (migration 0009): ce_source; empty when unrecorded
  std::int64_t created_at_us = 0;  // created_at, microseconds since the Unix epoch
  std::string time;         // created_at, RFC 3339 UTC with milliseconds: ce_time
  // 0: the first unpublished event of its charge, publishable now. k > 0: its charge's k-th successor in
  // the same claim, to be produced only once the charge's event of wave k-1 is persisted.
  int wave = 0;
};

// A delivered event's row: as much of it as marking it published takes.
struct DeliveredRow {
  std::int64_t position = 0;
  std::int64_t created_at_us = 0;
};

// What a relay owns after a rebalance.
struct ShardAssignment {
  std::vector<int> owned;  // ascending
  int members = 0;         // live relay sessions on this database, this one included
  int rank = 0;            // this session's place among them (0-based)
};

// Ordering of a rebalance: each session is a member while its session lives; member i of n should own
// the contiguous range of shards s with s * n / 256 == i. Advisory locks make ownership exclusive, so a
// shard another member still holds is simply not taken until that member lets it go.
class RelaySession {
 public:
  virtual ~RelaySession() = default;

  // Connects (a closed or broken session is reopened), joins as a member and LISTENs. Every shard held
  // before is lost by reopening: the caller starts from an empty assignment.
  virtual DbResult<void> Open() = 0;
  virtual bool IsOpen() const = 0;
  // Closes the session; the server releases its locks with it.
  virtual void Close() = 0;

  // Releases the shards this member should no longer own and tries to lock the ones it should.
  virtual DbResult<ShardAssignment> Rebalance() = 0;

  // The oldest `limit` unpublished events of the owned shards (fewer when some are cut), in position
  // order, in waves: wave 0 holds the first unpublished event of each charge, wave k its k-th successor
  // (at most `waves` of them; later ones are cut). A charge with a parked event has no event in the
  // claim. Empty `shards` returns nothing. The caller must not produce an event of wave k+1 before its
  // charge's event of wave k is persisted: that is what keeps a charge's events in order.
  // `unmarked`: positions of events this session delivered and has not marked yet; they are left out as
  // if published, so a charge's next event is its wave 0.
  virtual DbResult<std::vector<OutboxEvent>> Claim(const std::vector<int>& shards, int limit, int waves,
                                                   const std::vector<std::int64_t>& unmarked) = 0;
  DbResult<std::vector<OutboxEvent>> Claim(const std::vector<int>& shards, int limit, int waves) {
    return Claim(shards, limit, waves, {});
  }

  // The position the claims start their scan at: every event of the shards claimed last, below it, is
  // published (0 while none is known). Raised as claims go, a few times a second, under a proof that no
  // event can still commit below it (docs/outbox-relay.md, "The claim's floor").
  virtual std::int64_t ClaimFloor() const = 0;

  // Marks these rows published (their events were delivered); returns how many rows changed.
  virtual DbResult<std::int64_t> MarkPublished(const std::vector<DeliveredRow>& rows) = 0;

  // Claims share one transaction, which the mark (or any other call) ends: the outbox's partitions are
  // then locked and released once for several claims. The caller ends it itself before it waits on
  // anything but the database (Kafka's reports, a backoff, a long sleep), so that no table lock is held
  // meanwhile: retention's DETACH and a migration's ALTER would wait behind it, and writers behind them.
  // Does nothing when no claim is open.
  virtual DbResult<void> EndClaims() = 0;

  // Parks an event Kafka refused permanently, with the error text for the operator.
  virtual DbResult<void> Park(const OutboxEvent& event, const std::string& error) = 0;

  // Before sleeping: takes the "waiting" lock of each of `shards` not yet held, so that writers of those
  // shards send a NOTIFY (migration 0004). A shard whose writer is still committing cannot be taken yet;
  // it is counted in `pending` and the caller tries again shortly. After `newly_armed` > 0 the caller
  // must claim once more before sleeping: writers that skipped notifying have committed by then.
  struct Arming {
    int newly_armed = 0;
    int pending = 0;
  };
  virtual DbResult<Arming> ArmWakeups(const std::vector<int>& shards) = 0;
  // Busy again: writers stop notifying (their NOTIFY would serialise their commits for nothing).
  virtual DbResult<void> DisarmWakeups() = 0;

  // Waits up to `timeout` for an insert notification; true if one arrived (or was already pending).
  virtual DbResult<bool> WaitForInsert(std::chrono::milliseconds timeout) = 0;
};

// `application_name` shows in pg_stat_activity; each RelaySession is one connection. Every call on it has
// the deadline `settings.call_timeout`: one that passes it closes the session (its shards with it).
std::unique_ptr<RelaySession> MakePgRelaySession(std::string database_url, std::string application_name,
                                                 db::ConnectionSettings settings = {});

struct BacklogStats {
  std::int64_t unpublished = 0;  // parked rows included
  std::int64_t parked = 0;
  double oldest_age_seconds = 0;  // age of the oldest unpublished event; 0 when there is none
};

struct ParkedEvent {
  std::string id;
  std::string aggregateid;
  std::string type;
  int sequence = 0;
  std::string created_at;  // RFC 3339
  std::string parked_at;   // RFC 3339
  std::string error;
  std::int64_t payload_bytes = 0;
};

enum class ParkedChange {
  kDone,
  kNotParked,  // no parked, unpublished event has that id
};

// Who acts on a parked event, and why: the audit row (operator_actions) written in the change's transaction.
struct OperatorNote {
  std::string operator_name;
  std::string reason;
};

struct RetentionReport {
  int partitions_created = 0;
  std::vector<std::string> moved_to_history;  // older than yesterday, all published: now under outbox_history
  std::vector<std::string> dropped;           // days past retention dropped: every row in them was published
  std::vector<std::string> kept_unpublished;  // past retention, kept because a row is still unpublished
  std::vector<std::string> trimmed_ahead;     // empty days further ahead than days_ahead, dropped
  std::vector<std::string> failed;            // could not leave outbox for another reason (logged)
  std::int64_t default_rows_deleted = 0;      // published rows past retention removed from outbox_default
  bool skipped = false;                       // another session was running retention at the same time
};

struct RetentionPolicy {
  int retention_days = 7;    // a day's partition goes once all its rows are older than this
  int days_ahead = 2;        // partitions exist from yesterday to today + days_ahead
  std::chrono::milliseconds lock_timeout{500};  // detaching waits at most this for the table lock
};

class OutboxAdmin {
 public:
  virtual ~OutboxAdmin() = default;

  virtual DbResult<BacklogStats> Backlog() = 0;
  // Creates partitions ahead, moves fully published days older than yesterday to outbox_history and drops
  // them there at retention age; one session at a time does it.
  virtual DbResult<RetentionReport> RunRetention(const RetentionPolicy& policy) = 0;

  virtual DbResult<std::vector<ParkedEvent>> ListParked(int limit) = 0;
  // Unparks the event: the relay sends it again, then the charge's later events. Audited: `by` is on record
  // with the change, in its transaction.
  virtual DbResult<ParkedChange> RetryParked(const std::string& id, const OperatorNote& by) = 0;
  // Gives up on the event: marked published (and skipped) without being sent; later events flow. Audited.
  virtual DbResult<ParkedChange> SkipParked(const std::string& id, const OperatorNote& by) = 0;
};

std::unique_ptr<OutboxAdmin> MakePgOutboxAdmin(std::string database_url, std::string application_name,
                                               db::ConnectionSettings settings = {});

}  // namespace charge_outbox::outbox
