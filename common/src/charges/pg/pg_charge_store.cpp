// PgChargeStore: the SQL of the charge flow. Each operation is one statement (data-modifying CTEs), so
// one round trip and one implicit transaction: the intent and its event, or a state change and its
// event, commit together or not at all. An event's created_at (its ce_time) is the charge's updated_at as
// the statement sets it, so the header and the payload tell one time from one clock (docs/events.md); the
// outbox row's producer (its ce_source) is the session's application_name (migration 0009).
#include <pqxx/pqxx>  // its exception types, which PgConnection throws

#include "charge_outbox/charges/charge_store.hpp"
#include "charge_outbox/util/sha256.hpp"
#include "charge_outbox/util/time.hpp"
#include "charges/pg/charge_sql.hpp"

namespace charge_outbox::charges {
namespace {

namespace asio = boost::asio;
using db::DbResult;
using sql::kChargeColumns;
using sql::Nullable;
using sql::ReadCharge;
using sql::ToParams;

constexpr db::Statement kAuthenticate{
    "charge_authenticate",
    "SELECT merchant_id::text FROM api_keys WHERE key_hash = decode($1, 'hex') AND revoked_at IS NULL"};

constexpr db::Statement kBegin{
    "charge_begin",
    R"sql(
     WITH ins AS (
       INSERT INTO charges (id, merchant_id, idempotency_key, request_fingerprint, order_id, amount, currency,
                            payment_method, description, owner_id, lease_expires_at, last_sequence,
                            attempt_count, traceparent)
       VALUES (gen_random_uuid(), $1, $2, decode($3, 'hex'), $4, $5, $6, $7, $8, $9,
               now() + $10::bigint * interval '1 millisecond', 1, 1, $11)
       ON CONFLICT (merchant_id, idempotency_key) DO NOTHING
       RETURNING *
     ), event AS (
       INSERT INTO outbox (id, aggregateid, type, payload, sequence, shard, traceparent, created_at)
       SELECT gen_random_uuid(), charge_public_id(ins.id), 'payments.charge.initiated.v1',
              charge_event_payload(ROW(ins.*)::charges), 1, outbox_shard(ins.id), ins.traceparent, ins.created_at
       FROM ins
     ), attempt AS (
       INSERT INTO acquirer_attempts (charge_id, attempt_no, request_id, operation, actor, started_at)
       SELECT ins.id, 1, gen_random_uuid(), $12, $13, to_timestamp($14::bigint / 1000000.0) FROM ins
       RETURNING request_id)sql"
    ") SELECT " CHARGE_COLUMNS ", (SELECT request_id::text FROM attempt) FROM ins c"};

constexpr db::Statement kReadByKey{
    "charge_read_by_key",
    "SELECT " CHARGE_COLUMNS " FROM charges c WHERE c.merchant_id = $1 AND c.idempotency_key = $2"};

constexpr db::Statement kReadById{
    "charge_read_by_id",
    "SELECT " CHARGE_COLUMNS " FROM charges c WHERE c.merchant_id = $1 AND c.id = $2"};

constexpr db::Statement kFirstRequestId{
    "charge_first_request_id",
    "SELECT request_id::text FROM acquirer_attempts WHERE charge_id = $1 AND attempt_no = 1"};

constexpr db::Statement kTakeOver{
    "charge_take_over",
    R"sql(
     UPDATE charges c SET owner_id = $2, lease_expires_at = now() + $3::bigint * interval '1 millisecond'
      WHERE c.id = $1 AND )sql" STILL_PENDING("c")
    " AND (c.lease_expires_at IS NULL OR c.lease_expires_at <= now()) RETURNING " CHARGE_COLUMNS};

constexpr db::Statement kStartAttempt{
    "charge_start_attempt",
    R"sql(
     WITH c AS (UPDATE charges SET attempt_count = attempt_count + 1 WHERE id = $1 RETURNING id, attempt_count)
      INSERT INTO acquirer_attempts (charge_id, attempt_no, request_id, operation, actor, started_at)
      SELECT c.id, c.attempt_count, $2, $3, $4, to_timestamp($5::bigint / 1000000.0) FROM c RETURNING attempt_no)sql"};

constexpr db::Statement kFinishAttempt{
    "charge_finish_attempt",
    FINISH_ATTEMPT("$1", "$2", "$3", "$4", "$5", "$6")};

constexpr db::Statement kComplete{
    "charge_complete",
    R"sql(
     WITH upd AS (
       UPDATE charges SET status = $2::charge_status, acquirer_capture_id = COALESCE($3, acquirer_capture_id),
         decline_code = $4, failure_reason = $5, updated_at = to_timestamp($6::bigint / 1000000.0),
         response_status = $7::smallint, response_body = convert_to($8, 'UTF8'),
         last_sequence = last_sequence + 1, owner_id = NULL, lease_expires_at = NULL, next_check_at = NULL
       WHERE id = $1 AND )sql" STILL_PENDING("charges") R"sql( AND ($15::text IS NULL OR owner_id = $15)
       RETURNING *
     ), event AS (
       INSERT INTO outbox (id, aggregateid, type, payload, sequence, shard, traceparent, created_at)
       SELECT gen_random_uuid(), charge_public_id(upd.id), 'payments.charge.' || upd.status || '.v1',
              charge_event_payload(ROW(upd.*)::charges), upd.last_sequence, outbox_shard(upd.id), $9,
              upd.updated_at
       FROM upd)sql"
    "), attempt AS (" FINISH_ATTEMPT("$1", "$10", "$11", "$12", "$13", "$14") ")"
    " SELECT " CHARGE_COLUMNS " FROM upd c"};

// The loser of a Complete reads the charge again in a statement of its own: the losing statement's
// snapshot was taken before the winner committed, so it would still show `pending`.
constexpr db::Statement kReadByUuid{
    "charge_read_by_uuid",
    "SELECT " CHARGE_COLUMNS " FROM charges c WHERE c.id = $1"};

// $1 charge, $2 expected status, $3 reason, $4 at (Unix microseconds), $5 traceparent. The stored first
// response goes: from now on a replay answers what the state calls for, as GET does.
constexpr db::Statement kFlagForReview{
    "charge_flag_for_review",
    R"sql(
     WITH upd AS (
       UPDATE charges SET status = 'needs_review', failure_reason = $3,
         updated_at = to_timestamp($4::bigint / 1000000.0), last_sequence = last_sequence + 1,
         response_status = NULL, response_body = NULL,
         owner_id = NULL, lease_expires_at = NULL, next_check_at = NULL
       WHERE id = $1 AND status = $2::charge_status AND status NOT IN ('pending', 'needs_review')
       RETURNING *
     ), event AS (
       INSERT INTO outbox (id, aggregateid, type, payload, sequence, shard, traceparent, created_at)
       SELECT gen_random_uuid(), charge_public_id(upd.id), 'payments.charge.needs_review.v1',
              charge_event_payload(ROW(upd.*)::charges), upd.last_sequence, outbox_shard(upd.id), NULLIF($5, ''),
              upd.updated_at
       FROM upd)sql"
    ") SELECT " CHARGE_COLUMNS " FROM upd c"};

constexpr db::Statement kRenewLease{
    "charge_renew_lease",
    R"sql(
     UPDATE charges SET lease_expires_at = now() + $3::bigint * interval '1 millisecond'
      WHERE id = $1 AND owner_id = $2 AND )sql" STILL_PENDING("charges") " RETURNING 1"};

// A capture attempt with evidence not_sent provably never reached the acquirer; an unfinished one
// (evidence NULL: its process died, or its finish was never written) may have.
constexpr db::Statement kAttemptHistory{
    "charge_attempt_history",
    R"sql(
     WITH sent AS (
       SELECT count(*) AS n, max(started_at) AS last_at FROM acquirer_attempts
       WHERE charge_id = $1 AND operation = 'capture' AND evidence IS DISTINCT FROM 'not_sent'
     ) SELECT sent.n, count(a.attempt_no), (extract(epoch FROM min(a.started_at)) * 1000000)::bigint
      FROM sent LEFT JOIN acquirer_attempts a
        ON a.charge_id = $1 AND a.operation = 'lookup' AND a.outcome = 'not_found'
       AND (sent.last_at IS NULL OR a.started_at > sent.last_at)
      GROUP BY sent.n)sql"};

constexpr db::Statement kRelease{
    "charge_release",
    R"sql(
     WITH rel AS (
       UPDATE charges SET owner_id = NULL, lease_expires_at = NULL
       WHERE id = $1 AND owner_id = $2 AND )sql" STILL_PENDING("charges")
    "), attempt AS (" FINISH_ATTEMPT("$1", "$3", "$4", "$5", "$6", "$7") ")"
    " SELECT 1"};

constexpr db::Statement kCountPending{
    "charge_count_pending",
    R"sql(
     SELECT count(*) FROM charges WHERE status = 'pending'
      AND created_at < now() - $1::bigint * interval '1 millisecond')sql"};

constexpr db::Statement kStatements[] = {
    kAuthenticate, kBegin, kReadByKey, kReadById, kFirstRequestId, kTakeOver, kStartAttempt, kFinishAttempt, kComplete,
    kReadByUuid, kFlagForReview, kRenewLease, kAttemptHistory, kRelease, kCountPending
};

using db::PgConnection;

template <typename T, typename Job>
asio::awaitable<DbResult<T>> RunJob(db::PgPool& pool, Job job) {
  co_return co_await sql::RunJob<T>(pool, std::move(job));
}

class PgChargeStore final : public ChargeStore {
 public:
  explicit PgChargeStore(db::Database& database) : pool_(database.pool()) {}

  asio::awaitable<DbResult<std::optional<Merchant>>> Authenticate(const std::string& api_key) override {
    const auto hash = HashApiKey(api_key);
    const auto hex = util::ToHex(hash.data(), hash.size());
    co_return co_await RunJob<std::optional<Merchant>>(
        pool_, [&](PgConnection& conn) -> asio::awaitable<std::optional<Merchant>> {
          const auto r = co_await conn.Execute(kAuthenticate, hex);
          co_return r.empty() ? std::nullopt : std::optional<Merchant>(Merchant{r[0][0].as<std::string>()});
        });
  }

  asio::awaitable<DbResult<BeginResult>> Begin(const NewCharge& n, const Lease& lease,
                                              const FirstAttempt& first) override {
    co_return co_await RunJob<BeginResult>(pool_, [&](PgConnection& conn) -> asio::awaitable<BeginResult> {
      const auto fingerprint = util::ToHex(n.fingerprint.data(), n.fingerprint.size());
      // One statement in autocommit: atomic, and one round trip.
      const db::PgParams params(n.merchant_id, n.idempotency_key, fingerprint, n.terms.order_id, n.terms.amount,
                                n.terms.currency, n.terms.payment_method, Nullable(n.terms.description),
                                lease.owner_id, static_cast<std::int64_t>(lease.duration.count()), n.traceparent,
                                std::string(acquirer::ToString(first.operation)), first.actor,
                                util::ToUnixMicros(first.started_at));
      std::optional<db::PgResult> inserted;
      std::optional<std::string> lost;
      try {
        inserted = co_await conn.Execute(kBegin, params);
      } catch (const pqxx::broken_connection& e) {
        lost = e.what();
      }
      if (lost) {
        // The connection died with the statement sent: it may have committed. Never assume either way;
        // the caller calls Begin again with the same lease owner, which inserts or finds its own row.
        throw pqxx::in_doubt_error("connection lost during the intent insert: " + *lost);
      }
      if (!inserted->empty()) {
        const auto row = (*inserted)[0];
        co_return BeginResult{BeginOutcome::kCreated, ReadCharge(row), 1, row[kChargeColumns].as<std::string>()};
      }
      // The key exists. ON CONFLICT waited for its inserter to commit, so the row is there to read.
      for (int tries = 0; tries < 3; ++tries) {
        const auto existing = co_await conn.Execute(kReadByKey, n.merchant_id, n.idempotency_key);
        if (existing.empty()) break;
        auto charge = ReadCharge(existing[0]);
        if (charge.fingerprint != n.fingerprint) co_return BeginResult{BeginOutcome::kFingerprintMismatch, charge, 0};
        if (IsTerminal(charge.status)) co_return BeginResult{BeginOutcome::kFinished, charge, 0};
        // Our own insert, whose outcome we did not learn (the connection died during it) and the caller
        // retried: owners are unique per request, so this is ours.
        if (charge.owner_id == lease.owner_id) {
          const auto first_request = (co_await conn.Execute(kFirstRequestId, charge.id))[0][0].as<std::string>();
          co_return BeginResult{BeginOutcome::kCreated, charge, 1, first_request};
        }
        if (charge.lease_remaining.count() > 0) co_return BeginResult{BeginOutcome::kInFlight, charge, 0};
        const auto taken = co_await conn.Execute(kTakeOver, charge.id, lease.owner_id,
                                                 static_cast<std::int64_t>(lease.duration.count()));
        if (!taken.empty()) co_return BeginResult{BeginOutcome::kTakenOver, ReadCharge(taken[0]), 0};
        // Someone else took it over or resolved it between our read and our update: look again.
      }
      throw std::runtime_error("charge for an existing idempotency key could not be read back");
    });
  }

  asio::awaitable<DbResult<int>> StartAttempt(const std::string& charge_id, const AttemptStart& a) override {
    co_return co_await RunJob<int>(pool_, [&](PgConnection& conn) -> asio::awaitable<int> {
      const auto r = co_await conn.Execute(kStartAttempt, charge_id, a.request_id,
                                           std::string(acquirer::ToString(a.operation)), a.actor,
                                           util::ToUnixMicros(a.started_at));
      co_return r[0][0].as<int>();
    });
  }

  asio::awaitable<DbResult<void>> FinishAttempt(const std::string& charge_id, const AttemptFinish& a) override {
    const auto p = ToParams(a);
    co_return co_await RunJob<void>(pool_, [&](PgConnection& conn) -> asio::awaitable<void> {
      co_await conn.Execute(kFinishAttempt, charge_id, Nullable(p.attempt_no), Nullable(p.finished_at),
                            Nullable(p.outcome), Nullable(p.evidence), Nullable(p.http_status));
    });
  }

  asio::awaitable<DbResult<CompleteResult>> Complete(const std::string& charge_id, const Transition& t,
                                                     const std::optional<AttemptFinish>& attempt) override {
    const auto p = ToParams(attempt);
    const std::optional<std::string> response_status =
        t.response_status ? std::optional(std::to_string(*t.response_status)) : std::nullopt;
    std::optional<std::string> required_owner;
    switch (t.basis) {
      case Basis::kAcquirerAnswer: break;
      case Basis::kInference:
        // An inference without an owner could land over another actor's work: a bug, refused loudly.
        if (t.owner_id.empty()) co_return db::DbError{db::DbErrc::kFailed, "an inferred transition needs its owner"};
        required_owner = t.owner_id;
        break;
    }
    co_return co_await RunJob<CompleteResult>(pool_, [&](PgConnection& conn) -> asio::awaitable<CompleteResult> {
      const auto r = co_await conn.Execute(
          kComplete, charge_id, std::string(ToString(t.to)), Nullable(t.acquirer_capture_id),
          Nullable(t.decline_code), Nullable(t.failure_reason), util::ToUnixMicros(t.at), Nullable(response_status),
          Nullable(t.response_body), t.traceparent, Nullable(p.attempt_no), Nullable(p.finished_at),
          Nullable(p.outcome), Nullable(p.evidence), Nullable(p.http_status), Nullable(required_owner));
      if (!r.empty()) co_return CompleteResult{true, ReadCharge(r[0])};
      const auto now = co_await conn.Execute(kReadByUuid, charge_id);
      if (now.empty()) throw std::runtime_error("no charge " + charge_id + " to complete");
      co_return CompleteResult{false, ReadCharge(now[0])};
    });
  }

  asio::awaitable<DbResult<std::optional<Charge>>> FlagForReview(const std::string& charge_id, ChargeStatus expected,
                                                                 const std::string& reason, Timestamp at,
                                                                 const std::string& traceparent) override {
    const std::string status(ToString(expected));
    co_return co_await RunJob<std::optional<Charge>>(
        pool_, [&](PgConnection& conn) -> asio::awaitable<std::optional<Charge>> {
          const auto r =
              co_await conn.Execute(kFlagForReview, charge_id, status, reason, util::ToUnixMicros(at), traceparent);
          co_return r.empty() ? std::nullopt : std::optional(ReadCharge(r[0]));
        });
  }

  asio::awaitable<DbResult<bool>> RenewLease(const std::string& charge_id, const std::string& owner_id,
                                             std::chrono::milliseconds lease) override {
    co_return co_await RunJob<bool>(pool_, [&](PgConnection& conn) -> asio::awaitable<bool> {
      const auto r =
          co_await conn.Execute(kRenewLease, charge_id, owner_id, static_cast<std::int64_t>(lease.count()));
      co_return !r.empty();
    });
  }

  asio::awaitable<DbResult<AttemptHistory>> ReadAttemptHistory(const std::string& charge_id) override {
    co_return co_await RunJob<AttemptHistory>(pool_, [&](PgConnection& conn) -> asio::awaitable<AttemptHistory> {
      const auto r = co_await conn.Execute(kAttemptHistory, charge_id);
      const auto row = r[0];
      AttemptHistory history;
      history.capture_may_have_left = row[0].as<std::int64_t>() > 0;
      history.not_found_looks = static_cast<int>(row[1].as<std::int64_t>());
      if (!row[2].is_null()) history.first_not_found_at = util::FromUnixMicros(row[2].as<std::int64_t>());
      co_return history;
    });
  }

  asio::awaitable<DbResult<void>> Release(const std::string& charge_id, const std::string& owner_id,
                                          const std::optional<AttemptFinish>& attempt) override {
    const auto p = ToParams(attempt);
    co_return co_await RunJob<void>(pool_, [&](PgConnection& conn) -> asio::awaitable<void> {
      co_await conn.Execute(kRelease, charge_id, owner_id, Nullable(p.attempt_no), Nullable(p.finished_at),
                            Nullable(p.outcome), Nullable(p.evidence), Nullable(p.http_status));
    });
  }

  // Not coroutines themselves: each hands back FindOne's awaitable (no second frame per call), which holds
  // references to the arguments just as these functions' own frame would.
  asio::awaitable<DbResult<std::optional<Charge>>> FindById(const std::string& merchant_id,
                                                            const std::string& charge_id) override {
    return FindOne(kReadById, merchant_id, charge_id);
  }

  asio::awaitable<DbResult<std::optional<Charge>>> FindByKey(const std::string& merchant_id,
                                                             const std::string& idempotency_key) override {
    return FindOne(kReadByKey, merchant_id, idempotency_key);
  }

  asio::awaitable<DbResult<std::int64_t>> CountPendingOlderThan(std::chrono::milliseconds older_than) override {
    co_return co_await RunJob<std::int64_t>(pool_, [&](PgConnection& conn) -> asio::awaitable<std::int64_t> {
      const auto r = co_await conn.Execute(kCountPending, static_cast<std::int64_t>(older_than.count()));
      co_return r[0][0].as<std::int64_t>();
    });
  }

 private:
  // The charge a statement finds by the merchant and one key of it (its id, its idempotency key).
  asio::awaitable<DbResult<std::optional<Charge>>> FindOne(const db::Statement& statement,
                                                           const std::string& merchant_id, const std::string& key) {
    co_return co_await RunJob<std::optional<Charge>>(
        pool_, [&](PgConnection& conn) -> asio::awaitable<std::optional<Charge>> {
          const auto r = co_await conn.Execute(statement, merchant_id, key);
          co_return r.empty() ? std::nullopt : std::optional(ReadCharge(r[0]));
        });
  }

  db::PgPool& pool_;
};

}  // namespace

Fingerprint HashApiKey(const std::string& api_key) { return util::Sha256(api_key); }

std::vector<StatementText> PgChargeStoreStatements() {
  std::vector<StatementText> out;
  for (const auto& [name, sql] : kStatements) out.push_back({name, sql});
  return out;
}

std::unique_ptr<ChargeStore> MakePgChargeStore(db::Database& database) {
  return std::make_unique<PgChargeStore>(database);
}

}  // namespace charge_outbox::charges
