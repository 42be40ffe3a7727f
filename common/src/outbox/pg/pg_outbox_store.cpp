// PgRelaySession and PgOutboxAdmin: the outbox table's SQL. Each instance owns one libpqxx connection,
// used from one thread at a time.
#include <pqxx/pqxx>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <optional>
#include <random>
#include <set>
#include <string_view>
#include <unordered_map>

#include "charge_outbox/db/database.hpp"
#include "charge_outbox/outbox/outbox_store.hpp"
#include "charge_outbox/util/time.hpp"
#include "db/call_deadline.hpp"
#include "db/day_partitions.hpp"
#include "db/db_errors.hpp"
#include "db/statement.hpp"

namespace charge_outbox::outbox {
namespace {

// Advisory lock namespaces (the first key of the two-int4 form, so pg_locks shows it as classid).
// Arbitrary, but fixed forever: every replica of every release must agree on them.
constexpr int kMemberLockSpace = 0x0B0C0001;     // key 2: the member id of one relay session
constexpr int kShardLockSpace = 0x0B0C0002;      // key 2: the shard
constexpr int kRetentionLockSpace = 0x0B0C0003;  // key 2: 0; one retention run at a time
// Key 2: the shard. Held exclusively by the owner while it sleeps; the insert trigger of migration 0004
// tries it shared and notifies only when that fails. The trigger spells the number out: keep them equal.
constexpr int kWaitLockSpace = 0x0B0C0004;

constexpr const char* kNotifyChannel = "outbox_inserted";

// How often a session steps its claims' floor (kRaiseFloor): a step costs a round trip and a transaction
// id, and the floor trails the published events by about two steps.
constexpr std::chrono::milliseconds kFloorStepInterval{100};

// The member's window: its oldest $4 unpublished events, in position order, from its shards. Shards
// are owned in contiguous ranges, so BETWEEN is tested on the index entry and other members' rows
// cost no heap visit; $3 lists the shards only while a rebalance leaves holes in the range (empty
// otherwise: ANY walks the whole array for every row); $5 holds the events this session delivered and
// has not marked yet (the relay marks once every few claims), left out like published ones. The relay
// numbers each charge's events in the window (the waves); no lookup per row is needed because, within a
// charge, position order is sequence order (event N is committed before N+1 is inserted, and position is
// drawn at insert), and every event of a charge is in one shard: an unpublished predecessor of any row in
// the window is earlier in the same window (docs, "The claim query"). Nothing committed can be created in
// the future, so the scans skip the partitions made ahead. ce_time is formatted by the relay from the
// epoch microseconds: to_char costs about 1 µs a row. producer (0009) makes ce_source.
//
// $6 is the session's floor (kRaiseFloor): every event of the member's shards below it is published, so the
// scan starts there rather than at the index's head, where published events leave entries that a long
// snapshot elsewhere keeps from being removed (docs/outbox-relay.md, "The claim's floor").
//
// Two forms of it. While a parked event lies in the member's shards, kClaimAroundParked leaves out every
// charge with one entirely (its later events wait behind it), and however many are parked, they never fill
// the window. Otherwise kClaim, without that anti-join: it is a scan of each surviving partition, set up
// for every claim, and about a seventh of the claim's cost in the database (docs, "The claim query").
constexpr db::Statement kClaim{
    "outbox_claim",
    R"sql(
     SELECT o.id::text, o.aggregateid, o.type, o.payload::text, o.sequence, o.shard, o.position,
            COALESCE(o.traceparent, ''), (extract(epoch FROM o.created_at) * 1000000)::bigint,
            COALESCE(o.producer, '')
      FROM outbox o
      WHERE o.published_at IS NULL AND o.shard BETWEEN $1::smallint AND $2::smallint
        AND (cardinality($3::int[]) = 0 OR o.shard::int = ANY($3::int[])) AND o.parked_at IS NULL
        AND o.created_at < now() + interval '1 hour' AND o.position <> ALL($5::bigint[])
        AND o.position >= $6::bigint
      ORDER BY o.position LIMIT $4)sql"};

constexpr db::Statement kClaimAroundParked{
    "outbox_claim_around_parked",
    R"sql(
     SELECT o.id::text, o.aggregateid, o.type, o.payload::text, o.sequence, o.shard, o.position,
            COALESCE(o.traceparent, ''), (extract(epoch FROM o.created_at) * 1000000)::bigint,
            COALESCE(o.producer, '')
      FROM outbox o
      WHERE o.published_at IS NULL AND o.shard BETWEEN $1::smallint AND $2::smallint
        AND (cardinality($3::int[]) = 0 OR o.shard::int = ANY($3::int[])) AND o.parked_at IS NULL
        AND o.aggregateid NOT IN (SELECT p.aggregateid FROM outbox p
                                  WHERE p.parked_at IS NOT NULL AND p.published_at IS NULL
                                    AND p.created_at < now() + interval '1 hour')
        AND o.created_at < now() + interval '1 hour' AND o.position <> ALL($5::bigint[])
        AND o.position >= $6::bigint
      ORDER BY o.position LIMIT $4)sql"};

// One step of the claims' floor (docs/outbox-relay.md, "The claim's floor"). $1/$2 are the candidate a
// previous step left: a transaction id ($1, NULL when there is none) taken after reading that the
// sequence had handed out positions up to $2. Every writer takes its transaction id before it draws a
// position (migration 0011), so each writer of a position up to $2 has an id below $1; once this
// statement's snapshot has no running transaction at or below $1, all of them have ended and their rows
// are visible to it. The lowest unpublished position of the member's shards ($3..$4, $5 as in kClaim)
// between the floor ($6) and $2 is then the new floor, or $2 + 1 when there is none: parked and
// delivered-but-unmarked events are unpublished, so the floor never passes them. No created_at test: an
// event dated ahead is claimed once its time comes, and the floor must not pass it meanwhile.
//
// The statement also makes the next candidate: it reads the sequence (the `drawn` CTE, scanned before the
// outer row is formed) and only then takes a transaction id of its own (pg_current_xact_id() in the
// outer target list), so that id is above every writer's that drew a position up to what was read.
// `safe`: migration 0011's default is in place and no backend caches sequence values; otherwise the
// argument fails and the session claims without a floor.
constexpr db::Statement kRaiseFloor{
    "outbox_raise_floor",
    R"sql(
     WITH raised AS MATERIALIZED (
       SELECT CASE WHEN pg_snapshot_xmin(pg_current_snapshot()) > $1::xid8 THEN
                COALESCE((SELECT min(o.position) FROM outbox o
                           WHERE o.published_at IS NULL AND o.shard BETWEEN $3::smallint AND $4::smallint
                             AND (cardinality($5::int[]) = 0 OR o.shard::int = ANY($5::int[]))
                             AND o.position >= $6::bigint AND o.position <= $2::bigint),
                         $2::bigint + 1)
              END AS value),
     drawn AS MATERIALIZED (
       SELECT pg_sequence_last_value('outbox_position_seq'::regclass) AS value)
     SELECT (SELECT s.seqcache = 1 AND pg_get_expr(d.adbin, d.adrelid) LIKE '%pg_current_xact_id()%'
               FROM pg_sequence s, pg_attrdef d JOIN pg_attribute a ON a.attrelid = d.adrelid AND a.attnum = d.adnum
              WHERE s.seqrelid = 'outbox_position_seq'::regclass AND d.adrelid = 'outbox'::regclass
                AND a.attname = 'position') IS TRUE,
            raised.value, drawn.value, pg_current_xact_id()::text
       FROM raised, drawn)sql"};

// Whether any of the shards holds a parked event (through outbox_parked, normally empty).
constexpr db::Statement kAnyParked{
    "outbox_any_parked",
    R"sql(
     SELECT EXISTS (SELECT 1 FROM outbox
                     WHERE parked_at IS NOT NULL AND published_at IS NULL AND shard::int = ANY($1::int[])
                       AND created_at < now() + interval '1 hour'))sql"};

// Found through outbox_unpublished_in_order, in the order the claim read them. position identifies
// the row: outbox_position_seq draws it at insert and nothing else ever writes it. (An id test in the
// same statement would make the generic plan look the rows up through outbox_unpublished_id instead:
// random probes, four times slower.) The created_at range, a second wider than the events' since the
// bounds travel as floating-point seconds, lets PostgreSQL skip the partitions that cannot hold them.
// The new row version takes no index entry: every outbox index is over unpublished rows only.
// statement_timestamp(), not now(): the mark ends the claims' transaction, which began before the events did.
constexpr db::Statement kMark{
    "outbox_mark",
    R"sql(
     UPDATE outbox SET published_at = statement_timestamp()
      WHERE position = ANY($1::bigint[]) AND published_at IS NULL
        AND created_at BETWEEN to_timestamp($2::float8 / 1000000) - interval '1 second'
                           AND to_timestamp($3::float8 / 1000000) + interval '1 second')sql"};

constexpr db::Statement kPark{
    "outbox_park",
    R"sql(
     UPDATE outbox SET parked_at = now(), park_error = $3
      WHERE position = $1 AND id = $2::uuid AND published_at IS NULL)sql"};

// Members are the sessions holding a member lock on this database: a session that dies leaves at once.
constexpr db::Statement kMembers{
    "outbox_members",
    R"sql(
     SELECT objid::bigint FROM pg_locks
      WHERE locktype = 'advisory' AND granted AND objsubid = 2 AND classid = $1::bigint::oid
        AND database = (SELECT oid FROM pg_database WHERE datname = current_database())
      ORDER BY objid)sql"};

constexpr db::Statement kLockShards{
    "outbox_lock_shards",
    "SELECT s FROM unnest($1::int[]) AS s WHERE pg_try_advisory_lock($2::int, s)"};

constexpr db::Statement kUnlockShards{
    "outbox_unlock_shards",
    "SELECT count(*) FILTER (WHERE pg_advisory_unlock($2::int, s)) FROM unnest($1::int[]) AS s"};

constexpr db::Statement kRelayStatements[] = {kClaim, kClaimAroundParked, kRaiseFloor, kAnyParked,   kMark,
                                              kPark,  kMembers,           kLockShards, kUnlockShards};

// A PostgreSQL array literal of integers.
template <typename Int>
std::string ArrayLiteral(const std::vector<Int>& values) {
  std::string out = "{";
  for (std::size_t i = 0; i < values.size(); ++i) {
    if (i > 0) out += ',';
    out += std::to_string(values[i]);
  }
  out += '}';
  return out;
}
std::string IntArray(const std::vector<int>& values) { return ArrayLiteral(values); }
std::string BigintArray(const std::vector<std::int64_t>& values) { return ArrayLiteral(values); }

std::vector<int> ReadInts(const pqxx::result& r) {
  std::vector<int> out;
  out.reserve(r.size());
  for (const auto& row : r) out.push_back(row[0].as<int>());
  return out;
}

// Where and as whom the relay session and the admin connect: each owns one connection of its own (not
// the pool's), opened and reopened from this.
struct Endpoint {
  std::string url;
  std::string application_name;
  db::ConnectionSettings settings;
};

// Opens a connection that is never silently reopened: libpqxx 6 would otherwise reconnect a broken
// session behind our back, and a new session holds none of the old one's advisory locks.
std::unique_ptr<pqxx::connection> Connect(const Endpoint& endpoint) {
  auto conn = std::make_unique<pqxx::connection>(
      db::ConnectionString(endpoint.url, endpoint.application_name, endpoint.settings));
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
  conn->inhibit_reactivation(true);
#pragma GCC diagnostic pop
  pqxx::nontransaction tx(*conn);
  // created_at travels back to us as text (part of a row's key): one fixed time zone makes it exact.
  tx.exec("SET TIME ZONE 'UTC'");
  return conn;
}

// The deadline of one call on a session's own connection (see db::CallDeadlines); `allowance` is time
// the call spends waiting by design (a notification wait).
db::CallDeadlines::Armed ArmDeadline(db::CallDeadlines& deadlines, const pqxx::connection& conn,
                                     const db::ConnectionSettings& settings,
                                     std::chrono::milliseconds allowance = std::chrono::milliseconds{0}) {
  return deadlines.Arm(conn.sock(), db::CallDeadlines::Clock::now() + settings.call_timeout + allowance);
}

db::DbError NoAnswer(const db::ConnectionSettings& settings) {
  return {db::DbErrc::kUnavailable,
          "no answer within database.call_timeout (" + std::to_string(settings.call_timeout.count()) + "ms)"};
}

class InsertReceiver final : public pqxx::notification_receiver {
 public:
  InsertReceiver(pqxx::connection& conn, bool& flag) : pqxx::notification_receiver(conn, kNotifyChannel), flag_(flag) {}
  void operator()(const std::string&, int) override { flag_ = true; }

 private:
  bool& flag_;
};

class PgRelaySession final : public RelaySession {
 public:
  PgRelaySession(std::string url, std::string application_name, db::ConnectionSettings settings)
      : endpoint_{std::move(url), std::move(application_name), settings} {}
  ~PgRelaySession() override { Close(); }

  DbResult<void> Open() override {
    Close();
    std::optional<db::CallDeadlines::Armed> armed;
    try {
      conn_ = Connect(endpoint_);
      armed.emplace(ArmDeadline(deadlines_, *conn_, endpoint_.settings));
      for (const auto& [name, sql] : kRelayStatements) conn_->prepare(name, sql);
      receiver_ = std::make_unique<InsertReceiver>(*conn_, notified_);
      backend_pid_ = conn_->backendpid();
      std::mt19937 random(std::random_device{}());
      std::uniform_int_distribution<int> ids(1, 0x7FFFFFFF);
      pqxx::nontransaction tx(*conn_);
      // A mark (or a park) that a database crash forgets only makes its events go out again: at-least-once
      // holds without waiting for the WAL flush, which would otherwise add a disk flush to every batch.
      tx.exec("SET synchronous_commit = off");
      // The claim runs hundreds of times a second on a partitioned table. Left to choose, PostgreSQL keeps
      // planning it afresh (a custom plan looks cheaper than a generic one that cannot prune partitions at
      // plan time), and planning over every day partition cost about 3 ms a claim, twenty times its
      // execution (bench/steady-load, PG_STATS=1). The generic plan prunes the partitions at executor
      // start instead (created_at < now() + 1 hour), so the session plans each statement once.
      tx.exec("SET plan_cache_mode = force_generic_plan");
      for (int attempt = 0; attempt < 16 && member_id_ == 0; ++attempt) {
        const int candidate = ids(random);
        if (tx.exec_params1("SELECT pg_try_advisory_lock($1::int, $2::int)", kMemberLockSpace, candidate)[0]
                .as<bool>()) {
          member_id_ = candidate;
        }
      }
      if (member_id_ == 0) throw std::runtime_error("no free relay member id after 16 tries");
      // Anything inserted before LISTEN took effect has no notification: the first claim finds it.
      notified_ = true;
      return {};
    } catch (...) {
      auto error = db::CurrentDbError();
      if (armed && armed->expired()) error = NoAnswer(endpoint_.settings);
      armed.reset();
      Close();
      return error;
    }
  }

  bool IsOpen() const override { return conn_ != nullptr && conn_->is_open(); }

  void Close() override {
    in_claims_ = false;
    receiver_.reset();
    held_.clear();
    parked_in_owned_ = false;
    armed_.clear();
    floor_ = 0;
    floor_shards_.clear();
    candidate_.reset();
    member_id_ = 0;
    if (conn_) {
      try {
        conn_->disconnect();
      } catch (...) {
        // Closing a broken connection has nothing left to report.
      }
      conn_.reset();
    }
  }

  DbResult<ShardAssignment> Rebalance() override {
    // Wait locks follow shard locks; dropping them all here keeps that simple (the next sleep re-arms).
    if (auto disarmed = DisarmWakeups(); !disarmed) return disarmed.error();
    return Guarded<ShardAssignment>([&] {
      pqxx::nontransaction tx(*conn_);
      CommitClaims(tx);
      std::vector<std::int64_t> members;
      for (const auto& row : tx.exec_prepared(kMembers.name, kMemberLockSpace)) {
        members.push_back(row[0].as<std::int64_t>());
      }
      ShardAssignment a;
      a.members = static_cast<int>(members.size());
      const auto me = std::find(members.begin(), members.end(), member_id_);
      // Our own lock must be there (the session is alive); if pg_locks lags, count ourselves in.
      if (me == members.end()) {
        members.push_back(member_id_);
        std::sort(members.begin(), members.end());
        a.members = static_cast<int>(members.size());
      }
      a.rank = static_cast<int>(std::find(members.begin(), members.end(), member_id_) - members.begin());
      std::vector<int> release;
      std::vector<int> wanted;
      for (int s = 0; s < kShardCount; ++s) {
        // Contiguous ranges: the claim tests a range on each index entry (kClaim).
        const bool mine = s * a.members / kShardCount == a.rank;
        if (mine && !held_.contains(s)) wanted.push_back(s);
        if (!mine && held_.contains(s)) release.push_back(s);
      }
      if (!release.empty()) {
        tx.exec_prepared(kUnlockShards.name, IntArray(release), kShardLockSpace);
        for (int s : release) held_.erase(s);
      }
      if (!wanted.empty()) {
        for (int s : ReadInts(tx.exec_prepared(kLockShards.name, IntArray(wanted), kShardLockSpace))) held_.insert(s);
      }
      a.owned.assign(held_.begin(), held_.end());
      // Read after the shards are ours: a previous owner parks only while it holds a shard, and its parks
      // committed before it let the shard go. Until the next rebalance only this session can park in them.
      parked_in_owned_ =
          !held_.empty() && tx.exec_prepared1(kAnyParked.name, IntArray(a.owned))[0].as<bool>();
      return a;
    });
  }

  DbResult<std::vector<OutboxEvent>> Claim(const std::vector<int>& shards, int limit, int waves,
                                           const std::vector<std::int64_t>& unmarked) override {
    if (shards.empty()) return std::vector<OutboxEvent>{};
    return Guarded<std::vector<OutboxEvent>>([&] {
      pqxx::nontransaction tx(*conn_);
      std::vector<int> owned(shards);
      std::sort(owned.begin(), owned.end());
      owned.erase(std::unique(owned.begin(), owned.end()), owned.end());
      const bool whole_range = std::ssize(owned) == owned.back() - owned.front() + 1;
      const std::string listed = whole_range ? "{}" : IntArray(owned);
      // The floor was found over floor_shards_: a shard not among them may hold unpublished events below it.
      if (!std::includes(floor_shards_.begin(), floor_shards_.end(), owned.begin(), owned.end())) {
        floor_ = 0;
        floor_shards_ = owned;
      }
      if (!in_claims_ && std::chrono::steady_clock::now() >= next_floor_step_) RaiseFloor(tx, owned, listed);
      OpenClaims(tx);
      const auto& claim = parked_in_owned_ ? kClaimAroundParked : kClaim;
      const auto r =
          tx.exec_prepared(claim.name, owned.front(), owned.back(), listed, limit, BigintArray(unmarked), floor_);
      // A full window is a backlog, marked batch by batch anyway: the transaction would save nothing, and its
      // snapshot would hold vacuum's horizon for as long as the batch takes to publish, so that the index
      // entries of the rows just marked (by this member or another) could not be killed and every next claim
      // would visit them again.
      if (std::ssize(r) >= limit) CommitClaims(tx);
      std::vector<OutboxEvent> out;
      out.reserve(r.size());
      // Each charge's events in the window, counted as they come in position order: the k-th is wave k.
      std::unordered_map<std::string_view, int> seen;
      seen.reserve(r.size());
      for (const auto& row : r) {
        const std::string_view charge(row[1].c_str(), row[1].size());
        const int wave = seen[charge]++;
        if (wave >= waves) continue;  // a later claim takes it, once the earlier ones are published
        OutboxEvent e;
        e.id = row[0].as<std::string>();
        e.aggregateid = std::string(charge);
        e.type = row[2].as<std::string>();
        e.payload = row[3].as<std::string>();
        e.sequence = row[4].as<int>();
        e.shard = row[5].as<int>();
        e.position = row[6].as<std::int64_t>();
        e.traceparent = row[7].as<std::string>();
        e.created_at_us = row[8].as<std::int64_t>();
        e.time = util::FormatRfc3339Micros(e.created_at_us);
        e.producer = row[9].as<std::string>();
        e.wave = wave;
        out.push_back(std::move(e));
      }
      return out;
    });
  }

  std::int64_t ClaimFloor() const override { return floor_; }

  DbResult<std::int64_t> MarkPublished(const std::vector<DeliveredRow>& rows) override {
    if (rows.empty()) return std::int64_t{0};
    return Guarded<std::int64_t>([&] {
      // Any order: the index scan sorts an = ANY array itself.
      std::vector<std::int64_t> positions;
      positions.reserve(rows.size());
      std::int64_t oldest = rows.front().created_at_us;
      std::int64_t newest = oldest;
      for (const auto& row : rows) {
        positions.push_back(row.position);
        oldest = std::min(oldest, row.created_at_us);
        newest = std::max(newest, row.created_at_us);
      }
      // The claims' transaction ends with it; with none open, one statement is its own transaction.
      pqxx::nontransaction tx(*conn_);
      const auto marked = tx.exec_prepared(kMark.name, BigintArray(positions), oldest, newest).affected_rows();
      CommitClaims(tx);
      return static_cast<std::int64_t>(marked);
    });
  }

  DbResult<void> Park(const OutboxEvent& event, const std::string& error) override {
    // Set first: a park that fails may still have committed, and the next claims must go around it.
    parked_in_owned_ = true;
    auto parked = Guarded<bool>([&] {
      pqxx::nontransaction tx(*conn_);
      CommitClaims(tx);
      tx.exec_prepared(kPark.name, event.position, event.id, error);
      return true;
    });
    if (!parked) return parked.error();
    return {};
  }

  DbResult<Arming> ArmWakeups(const std::vector<int>& shards) override {
    std::vector<int> wanted;
    for (int s : shards) {
      if (!armed_.contains(s)) wanted.push_back(s);
    }
    if (wanted.empty()) return Arming{};
    return Guarded<Arming>([&] {
      pqxx::nontransaction tx(*conn_);
      CommitClaims(tx);
      const auto got = ReadInts(tx.exec_prepared(kLockShards.name, IntArray(wanted), kWaitLockSpace));
      armed_.insert(got.begin(), got.end());
      return Arming{.newly_armed = static_cast<int>(got.size()),
                    .pending = static_cast<int>(wanted.size() - got.size())};
    });
  }

  DbResult<void> DisarmWakeups() override {
    if (armed_.empty()) return {};
    auto done = Guarded<bool>([&] {
      pqxx::nontransaction tx(*conn_);
      tx.exec_prepared(kUnlockShards.name, IntArray({armed_.begin(), armed_.end()}), kWaitLockSpace);
      armed_.clear();
      return true;
    });
    if (!done) return done.error();
    return {};
  }

  DbResult<void> EndClaims() override {
    if (!in_claims_) return {};
    auto done = Guarded<bool>([&] {
      pqxx::nontransaction tx(*conn_);
      CommitClaims(tx);
      return true;
    });
    if (!done) return done.error();
    return {};
  }

  DbResult<bool> WaitForInsert(std::chrono::milliseconds timeout) override {
    return Guarded<bool>(timeout, [&] {
      if (in_claims_) {  // a session in a transaction is sent no notifications
        pqxx::nontransaction tx(*conn_);
        CommitClaims(tx);
      }
      conn_->get_notifs();
      if (!notified_ && timeout.count() > 0) {
        conn_->await_notification(static_cast<long>(timeout.count() / 1000),
                                  static_cast<long>(timeout.count() % 1000) * 1000);
      }
      const bool woke = notified_;
      notified_ = false;
      return woke;
    });
  }

 private:
  // Claims run in one transaction until the mark (or any other call) ends it: PostgreSQL then locks the
  // outbox's partitions and indexes once for all of them and releases them once, where every autocommitted
  // claim took them and released them again, and each release walked the session's 257 advisory locks.
  // READ COMMITTED whatever the database's default: each claim sees every commit before it, and vacuum's
  // horizon follows the last claim (its snapshot lives until the next statement), not the transaction's
  // start; claims write nothing, so it has no transaction id until the mark. Under a steady flow it lasts a
  // mark's delay (50 ms) and a few lingers; the loop ends it (EndClaims) before waiting on anything else,
  // so a DDL statement (retention's DETACH, a migration) waits that long at most.
  void OpenClaims(pqxx::nontransaction& tx) {
    if (in_claims_) return;
    tx.exec("BEGIN ISOLATION LEVEL READ COMMITTED");
    in_claims_ = true;
  }
  void CommitClaims(pqxx::nontransaction& tx) {
    if (!in_claims_) return;
    in_claims_ = false;
    tx.exec("COMMIT");
  }

  // One step of kRaiseFloor, outside the claims' transaction: the statement takes a transaction id, which
  // must not stay open (every other session's snapshots would count it as running until the mark).
  // The floor only saves work: a step the database refuses (a privilege, a renamed sequence) leaves the
  // claims without one, logged, and is tried again a minute later; the claim goes ahead either way.
  void RaiseFloor(pqxx::nontransaction& tx, const std::vector<int>& owned, const std::string& listed) {
    next_floor_step_ = std::chrono::steady_clock::now() + kFloorStepInterval;
    const char* candidate_xid = candidate_ ? candidate_->xid.c_str() : nullptr;  // NULL: no candidate yet
    pqxx::row row;
    try {
      row = tx.exec_prepared1(kRaiseFloor.name, candidate_xid, candidate_ ? candidate_->drawn : 0, owned.front(),
                              owned.back(), listed, floor_);
    } catch (const pqxx::sql_error& e) {
      spdlog::warn("outbox relay: claiming without a floor for a minute: {}", e.what());
      floor_ = 0;
      candidate_.reset();
      next_floor_step_ = std::chrono::steady_clock::now() + std::chrono::minutes{1};
      return;
    }
    if (!row[0].as<bool>()) {  // not safe
      floor_ = 0;
      candidate_.reset();
      return;
    }
    if (!row[1].is_null()) {
      floor_ = std::max(floor_, row[1].as<std::int64_t>());
      floor_shards_ = owned;
      candidate_.reset();
    }
    if (row[2].is_null()) return;  // the sequence has handed out nothing yet
    const auto drawn = row[2].as<std::int64_t>();
    // A sequence set back below the floor (setval) gives new events positions under it.
    if (drawn < floor_ - 1) {
      floor_ = 0;
      candidate_.reset();
      return;
    }
    // An older candidate is kept until it passes: a newer one would wait for newer writers as well.
    if (!candidate_) candidate_ = Candidate{.xid = row[3].as<std::string>(), .drawn = drawn};
  }

  // Runs `job` on the open session; any failure is converted, and a session that broke (or was
  // silently replaced) is closed, so that the caller reopens it and starts over with no shards.
  // Each call has its deadline (database.call_timeout, plus `waiting` for a call that waits by design):
  // a session that stops answering is closed, its shards given up, rather than holding the loop.
  template <typename T, typename Job>
  DbResult<T> Guarded(Job job) {
    return Guarded<T>(std::chrono::milliseconds{0}, std::move(job));
  }
  template <typename T, typename Job>
  DbResult<T> Guarded(std::chrono::milliseconds waiting, Job job) {
    if (!IsOpen()) return DbError{DbErrc::kUnavailable, "relay session is not open"};
    std::optional<db::CallDeadlines::Armed> armed(ArmDeadline(deadlines_, *conn_, endpoint_.settings, waiting));
    try {
      T value = job();
      if (armed->expired()) throw pqxx::broken_connection("deadline");  // answered as the socket closed
      armed.reset();
      if (conn_->backendpid() != backend_pid_) {
        Close();
        return DbError{DbErrc::kUnavailable, "relay session was replaced"};
      }
      return value;
    } catch (...) {
      auto error = db::CurrentDbError();
      const bool expired = armed && armed->expired();
      armed.reset();
      if (expired) error = NoAnswer(endpoint_.settings);
      if (expired || error.code == DbErrc::kUnavailable || error.code == DbErrc::kInDoubt || !conn_->is_open()) {
        Close();
      } else if (in_claims_) {
        // A statement failed inside the claims' transaction: nothing in it was written but a mark, which
        // the caller reports as failed; end it so that the next call starts clean.
        in_claims_ = false;
        try {
          pqxx::nontransaction tx(*conn_);
          tx.exec("ROLLBACK");
        } catch (...) {
          Close();
        }
      }
      return error;
    }
  }

  Endpoint endpoint_;
  db::CallDeadlines deadlines_;
  std::unique_ptr<pqxx::connection> conn_;
  std::unique_ptr<InsertReceiver> receiver_;
  bool notified_ = false;
  int backend_pid_ = 0;
  int member_id_ = 0;
  bool in_claims_ = false;  // the claims' transaction is open (OpenClaims)
  std::set<int> held_;
  // A parked event may lie in a held shard, so claims take kClaimAroundParked: set by a rebalance that found
  // one and by Park, cleared by a rebalance that found none (after `parked retry` or `skip`).
  bool parked_in_owned_ = false;
  std::set<int> armed_;  // shards whose wait lock this session holds
  // The claims' floor (kRaiseFloor): every event of floor_shards_ (ascending) below floor_ is published.
  // Claims of other shards start it over at 0.
  std::int64_t floor_ = 0;
  std::vector<int> floor_shards_;
  struct Candidate {
    std::string xid;  // xid8, as text
    std::int64_t drawn = 0;
  };
  std::optional<Candidate> candidate_;
  std::chrono::steady_clock::time_point next_floor_step_{};
};

class PgOutboxAdmin final : public OutboxAdmin {
 public:
  PgOutboxAdmin(std::string url, std::string application_name, db::ConnectionSettings settings)
      : endpoint_{std::move(url), std::move(application_name), settings} {}

  DbResult<BacklogStats> Backlog() override {
    return Run<BacklogStats>([](pqxx::connection& conn) {
      pqxx::nontransaction tx(conn);
      const auto row = tx.exec1(
          R"sql(
           SELECT count(*), count(*) FILTER (WHERE parked_at IS NOT NULL),
                  COALESCE(extract(epoch FROM clock_timestamp() - min(created_at)), 0)::float8
            FROM outbox WHERE published_at IS NULL)sql");
      return BacklogStats{.unpublished = row[0].as<std::int64_t>(),
                          .parked = row[1].as<std::int64_t>(),
                          .oldest_age_seconds = std::max(0.0, row[2].as<double>())};
    });
  }

  // Retention keeps under `outbox` only the days that can still receive or hold unpublished rows
  // (docs/outbox-relay.md, "Retention"): every partition there costs each of the relay's claims.
  DbResult<RetentionReport> RunRetention(const RetentionPolicy& policy) override {
    return Run<RetentionReport>([&](pqxx::connection& conn) {
      RetentionReport report;
      const auto pass = db::BeginRetentionPass(conn, kRetentionLockSpace, "outbox", policy.days_ahead);
      report.skipped = !pass;
      if (!pass) return report;
      report.partitions_created = pass->partitions_created;
      for (const auto& day : pass->days) {
        const bool past_retention = day.age_days > policy.retention_days;
        if (day.parent == "outbox" && day.age_days >= 2) {
          Retire(conn, day.name, past_retention, policy, report);
        } else if (day.parent == "outbox" && day.age_days < -policy.days_ahead) {
          TrimAhead(conn, day.name, policy, report);
        } else if (day.parent == kHistory && past_retention) {
          // Nothing writes or claims history: no lock to wait for but a reader's.
          pqxx::work tx(conn);
          SetLockTimeout(tx, policy);
          tx.exec_params("SELECT outbox_drop_history_day($1)", day.name);
          tx.commit();
          report.dropped.push_back(day.name);
        }
      }
      {
        pqxx::work tx(conn);
        const auto r = tx.exec_params(
            R"sql(
             DELETE FROM outbox_default WHERE published_at IS NOT NULL
               AND created_at < ((now() AT TIME ZONE 'UTC')::date - $1::int)::timestamp AT TIME ZONE 'UTC')sql",
            policy.retention_days);
        tx.commit();
        report.default_rows_deleted = static_cast<std::int64_t>(r.affected_rows());
      }
      return report;
    });
  }

  static constexpr const char* kHistory = "outbox_history";

  static void SetLockTimeout(pqxx::work& tx, const RetentionPolicy& policy) {
    tx.exec("SET LOCAL lock_timeout = '" + std::to_string(policy.lock_timeout.count()) + "ms'");
  }

  // A day older than yesterday leaves `outbox` once every row in it is published: for outbox_history, or
  // past retention for good. A writer still inserting into it (a transaction begun that day) holds it;
  // the detach waits at most the lock timeout for that writer, and the look again under the lock means
  // nothing unpublished ever leaves. A writer of that day that comes later lands in outbox_default, which
  // the relay claims from as from any partition. The DDL is the owner's, run by outbox_retire_day
  // (migration 0015): the relay's role needs none.
  static void Retire(pqxx::connection& conn, const std::string& part, bool past_retention,
                     const RetentionPolicy& policy, RetentionReport& report) {
    try {
      pqxx::work tx(conn);
      SetLockTimeout(tx, policy);
      // It looks without the detach's lock first (the relay is normally days ahead of this), then under it;
      // the detach and the drop or INHERIT are one transaction: a day is under one parent or the other.
      const auto outcome =
          tx.exec_params1("SELECT outbox_retire_day($1, $2)", part, past_retention)[0].as<std::string>();
      tx.commit();
      if (outcome == "kept") {
        if (past_retention) report.kept_unpublished.push_back(part);
        return;
      }
      (outcome == "dropped" ? report.dropped : report.moved_to_history).push_back(part);
    } catch (const pqxx::sql_error& e) {
      // 55P03 lock_not_available: writers or long readers hold the table; the next run tries again.
      if (e.sqlstate() == "55P03") {
        spdlog::warn("outbox retention: {} is busy (lock timeout), trying again next run", part);
        return;
      }
      // Anything else (its columns no longer match outbox_history's, say) keeps the day where it is, and
      // the rest of the pass goes on: a day left in `outbox` costs the relay, it loses nothing.
      spdlog::error("outbox retention: {} stays in outbox: {}", part, e.what());
      report.failed.push_back(part);
    }
  }

  // A day further ahead than days_ahead (made while the setting was larger, or by migration 0001) goes while
  // it is empty: the days ahead exist so that no insert lands in outbox_default, and each one costs every
  // claim of the relay. outbox_trim_day_ahead (0015) detaches it and drops it unless it holds a row.
  static void TrimAhead(pqxx::connection& conn, const std::string& part, const RetentionPolicy& policy,
                        RetentionReport& report) {
    try {
      pqxx::work tx(conn);
      SetLockTimeout(tx, policy);
      const bool dropped = tx.exec_params1("SELECT outbox_trim_day_ahead($1)", part)[0].as<bool>();
      tx.commit();
      if (dropped) report.trimmed_ahead.push_back(part);
    } catch (const pqxx::sql_error& e) {
      if (e.sqlstate() != "55P03") throw;
      spdlog::warn("outbox retention: {} is busy (lock timeout), trying again next run", part);
    }
  }

  DbResult<std::vector<ParkedEvent>> ListParked(int limit) override {
    return Run<std::vector<ParkedEvent>>([&](pqxx::connection& conn) {
      pqxx::nontransaction tx(conn);
      const auto r = tx.exec_params(
          R"sql(
           SELECT id::text, aggregateid, type, sequence, rfc3339(created_at), rfc3339(parked_at),
                  COALESCE(park_error, ''), octet_length(payload::text)
            FROM outbox WHERE parked_at IS NOT NULL AND published_at IS NULL
            ORDER BY created_at, position LIMIT $1)sql",
          limit);
      std::vector<ParkedEvent> out;
      for (const auto& row : r) {
        out.push_back(ParkedEvent{.id = row[0].as<std::string>(),
                                  .aggregateid = row[1].as<std::string>(),
                                  .type = row[2].as<std::string>(),
                                  .sequence = row[3].as<int>(),
                                  .created_at = row[4].as<std::string>(),
                                  .parked_at = row[5].as<std::string>(),
                                  .error = row[6].as<std::string>(),
                                  .payload_bytes = row[7].as<std::int64_t>()});
      }
      return out;
    });
  }

  DbResult<ParkedChange> RetryParked(const std::string& id, const OperatorNote& by) override {
    return Change(id, by, "parked.retry", "retried",
                  "UPDATE outbox SET parked_at = NULL"
                  " WHERE id = $1::uuid AND parked_at IS NOT NULL AND published_at IS NULL RETURNING park_error");
  }

  DbResult<ParkedChange> SkipParked(const std::string& id, const OperatorNote& by) override {
    return Change(id, by, "parked.skip", "skipped (never sent)",
                  "UPDATE outbox SET published_at = now(), skipped_at = now()"
                  " WHERE id = $1::uuid AND parked_at IS NOT NULL AND published_at IS NULL RETURNING park_error");
  }

 private:
  // The change and its audit row (operator_actions, the review store's table: a person's actions in one
  // place) in one transaction: an action nobody can account for never happens.
  DbResult<ParkedChange> Change(const std::string& id, const OperatorNote& by, const char* action,
                                const char* after, const std::string& sql) {
    return Run<ParkedChange>([&](pqxx::connection& conn) {
      pqxx::work tx(conn);
      const auto r = tx.exec_params(sql, id);
      if (r.size() != 1) return ParkedChange::kNotParked;
      const auto error = r[0][0].is_null() ? std::string() : r[0][0].as<std::string>();
      tx.exec_params("INSERT INTO operator_actions (operator, action, subject, reason, before, after)"
                     " VALUES ($1, $2, $3, $4, left('parked: ' || $5, 1000), $6)",
                     by.operator_name, action, id, by.reason, error, after);
      tx.commit();
      return ParkedChange::kDone;
    });
  }

  template <typename T, typename Job>
  DbResult<T> Run(Job job) {
    std::optional<db::CallDeadlines::Armed> armed;
    try {
      if (!conn_ || !conn_->is_open()) conn_ = Connect(endpoint_);
      armed.emplace(ArmDeadline(deadlines_, *conn_, endpoint_.settings));
      return job(*conn_);
    } catch (...) {
      auto error = db::CurrentDbError();
      if (armed && armed->expired()) error = NoAnswer(endpoint_.settings);
      armed.reset();
      if (conn_ && !conn_->is_open()) conn_.reset();
      if (error.code == DbErrc::kUnavailable) conn_.reset();
      return error;
    }
  }

  Endpoint endpoint_;
  db::CallDeadlines deadlines_;
  std::unique_ptr<pqxx::connection> conn_;
};

}  // namespace

std::unique_ptr<RelaySession> MakePgRelaySession(std::string database_url, std::string application_name,
                                                 db::ConnectionSettings settings) {
  return std::make_unique<PgRelaySession>(std::move(database_url), std::move(application_name), settings);
}

std::unique_ptr<OutboxAdmin> MakePgOutboxAdmin(std::string database_url, std::string application_name,
                                               db::ConnectionSettings settings) {
  return std::make_unique<PgOutboxAdmin>(std::move(database_url), std::move(application_name), settings);
}

}  // namespace charge_outbox::outbox
