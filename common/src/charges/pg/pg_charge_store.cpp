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
       SELECT ins.id, 1, $12::uuid, $13, $14, clock_timestamp() FROM ins
       RETURNING request_id)sql"
    ") SELECT " CHARGE_COLUMNS ", (SELECT request_id::text FROM attempt) FROM ins c"};

constexpr db::Statement kReadByKey{
    "charge_read_by_key",
    "SELECT " CHARGE_COLUMNS " FROM charges c WHERE c.merchant_id = $1 AND c.idempotency_key = $2"};

constexpr db::Statement kReadById{
    "charge_read_by_id",
    "SELECT " CHARGE_COLUMNS " FROM charges c WHERE c.merchant_id = $1 AND c.id = $2"};

constexpr db::Statement kTakeOver{
    "charge_take_over",
    R"sql(
     UPDATE charges c SET owner_id = $2, lease_expires_at = now() + $3::bigint * interval '1 millisecond'
      WHERE c.id = $1 AND )sql" STILL_PENDING("c")
    " AND (c.lease_expires_at IS NULL OR c.lease_expires_at <= now()) RETURNING " CHARGE_COLUMNS};

// $1 charge, $2 request id, $3 operation, $4 actor, $5 owner (NULL: a lookup, which needs none, or a
// person's void), $6 the lease renewed (ms), $7 a capture's deadline (ms from the charge's creation), $8 a
// person's void (charge-admin), recorded only while the charge is in needs_review. A capture or a void is
// recorded only while $5 holds a live lease on the pending charge, which this renews: an owner that lost
// its charge (its lease ran out while its database or the acquirer was slow, and someone took over) sends
// nothing more. A capture also only before the deadline and while no void of the charge is on record.
// Every test reads the database's clock, as started_at does.
constexpr db::Statement kStartAttempt{
    "charge_start_attempt",
    R"sql(
     WITH c AS (
       UPDATE charges SET attempt_count = attempt_count + 1,
         voids_recorded = voids_recorded + CASE WHEN $3 = 'void' THEN 1 ELSE 0 END,
         lease_expires_at = CASE WHEN $5::text IS NULL THEN lease_expires_at
                                 ELSE now() + $6::bigint * interval '1 millisecond' END
       WHERE id = $1
         AND ($5::text IS NULL OR (owner_id = $5 AND lease_expires_at > now() AND )sql" STILL_PENDING("charges") R"sql())
         AND ($8::boolean IS NOT TRUE OR status = 'needs_review')
         AND ($3 <> 'capture'
              OR (created_at > now() - $7::bigint * interval '1 millisecond'
                  AND NOT EXISTS (SELECT 1 FROM acquirer_attempts v WHERE v.charge_id = $1 AND v.operation = 'void')))
       RETURNING id, attempt_count)
      INSERT INTO acquirer_attempts (charge_id, attempt_no, request_id, operation, actor, started_at)
      SELECT c.id, c.attempt_count, $2, $3, $4, clock_timestamp() FROM c RETURNING attempt_no)sql"};

// Why kStartAttempt or kComplete left a charge alone: $1 charge, $2 owner. Read in a statement of its
// own, after the refused one.
constexpr db::Statement kRefusalFacts{
    "charge_refusal_facts",
    R"sql(
     SELECT ((c.status = 'pending' AND c.owner_id IS NOT DISTINCT FROM $2::text AND c.lease_expires_at > now())
              IS TRUE)::int,
            EXISTS (SELECT 1 FROM acquirer_attempts v WHERE v.charge_id = c.id AND v.operation = 'void')::int,
            floor(extract(epoch FROM now() - c.created_at) * 1000)::bigint
      FROM charges c WHERE c.id = $1)sql"};

constexpr db::Statement kFinishAttempt{
    "charge_finish_attempt",
    FINISH_ATTEMPT("$1", "$2", "$3", "$4", "$5", "$6")};

// $1 charge, $2 status, $3 capture id, $4 decline code, $5 failure reason, $6/$7 the response to store
// (its updated_at at $16, kDatabaseTimeMark, replaced by the statement's own time), $8 traceparent,
// $9..$13 the attempt to finish, $14 the owner an inference needs, $15 a capture's deadline (ms). The
// charge's updated_at and its event's created_at (ce_time) are now(): the database's clock orders a
// charge's events, whichever host wrote each. A capture lands only before the deadline and while no void
// of the charge is on record: a stale proof of a capture read before a void (a run that stalled past its
// lease while another voided it past the deadline) must not undo that void.
constexpr db::Statement kComplete{
    "charge_complete",
    R"sql(
     WITH upd AS (
       UPDATE charges SET status = $2::charge_status, acquirer_capture_id = COALESCE($3, acquirer_capture_id),
         decline_code = $4, failure_reason = $5, updated_at = now(), response_status = $6::smallint,
         response_body = convert_to(replace($7, $16, '"updated_at":"' || rfc3339(now()) || '"'), 'UTF8'),
         last_sequence = last_sequence + 1, owner_id = NULL, lease_expires_at = NULL, next_check_at = NULL
       WHERE id = $1 AND )sql" STILL_PENDING("charges") R"sql( AND ($14::text IS NULL OR owner_id = $14)
         AND ($2 <> 'captured'
              OR (created_at > now() - $15::bigint * interval '1 millisecond'
                  AND NOT EXISTS (SELECT 1 FROM acquirer_attempts v WHERE v.charge_id = $1 AND v.operation = 'void')))
       RETURNING *
     ), event AS (
       INSERT INTO outbox (id, aggregateid, type, payload, sequence, shard, traceparent, created_at)
       SELECT gen_random_uuid(), charge_public_id(upd.id), 'payments.charge.' || upd.status || '.v1',
              charge_event_payload(ROW(upd.*)::charges), upd.last_sequence, outbox_shard(upd.id), $8,
              upd.updated_at
       FROM upd)sql"
    "), attempt AS (" FINISH_ATTEMPT("$1", "$9", "$10", "$11", "$12", "$13") ")"
    " SELECT " CHARGE_COLUMNS " FROM upd c"};

// The loser of a Complete reads the charge again in a statement of its own: the losing statement's
// snapshot was taken before the winner committed, so it would still show `pending`.
constexpr db::Statement kReadByUuid{
    "charge_read_by_uuid",
    "SELECT " CHARGE_COLUMNS " FROM charges c WHERE c.id = $1"};

// $1 charge, $2 expected status, $3 reason, $4 traceparent. The stored first response goes: from now on a
// replay answers what the state calls for, as GET does.
constexpr db::Statement kFlagForReview{
    "charge_flag_for_review",
    R"sql(
     WITH upd AS (
       UPDATE charges SET status = 'needs_review', failure_reason = $3, updated_at = now(),
         last_sequence = last_sequence + 1,
         response_status = NULL, response_body = NULL,
         owner_id = NULL, lease_expires_at = NULL, next_check_at = NULL
       WHERE id = $1 AND status = $2::charge_status AND status NOT IN ('pending', 'needs_review')
       RETURNING *
     ), event AS (
       INSERT INTO outbox (id, aggregateid, type, payload, sequence, shard, traceparent, created_at)
       SELECT gen_random_uuid(), charge_public_id(upd.id), 'payments.charge.needs_review.v1',
              charge_event_payload(ROW(upd.*)::charges), upd.last_sequence, outbox_shard(upd.id), NULLIF($4, ''),
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
       SELECT count(*) AS n, count(*) FILTER (WHERE finished_at IS NOT NULL) AS answered, max(started_at) AS last_at
       FROM acquirer_attempts
       WHERE charge_id = $1 AND operation = 'capture' AND evidence IS DISTINCT FROM 'not_sent'
     ) SELECT sent.n, count(a.attempt_no), (extract(epoch FROM min(a.started_at)) * 1000000)::bigint,
              EXISTS (SELECT 1 FROM acquirer_attempts v WHERE v.charge_id = $1 AND v.operation = 'void')::int,
              sent.answered, floor(extract(epoch FROM now() - min(a.started_at)) * 1000)::bigint,
              (SELECT count(*) FROM acquirer_attempts v
                WHERE v.charge_id = $1 AND v.operation = 'void' AND v.outcome = 'stored_error')
      FROM sent LEFT JOIN acquirer_attempts a
        ON a.charge_id = $1 AND a.operation = 'lookup' AND a.outcome = 'not_found'
       AND (sent.last_at IS NULL OR a.started_at > sent.last_at)
      GROUP BY sent.n, sent.answered)sql"};

constexpr db::Statement kRelease{
    "charge_release",
    R"sql(
     WITH rel AS (
       UPDATE charges SET owner_id = NULL, lease_expires_at = NULL
       WHERE id = $1 AND owner_id = $2 AND )sql" STILL_PENDING("charges")
    "), attempt AS (" FINISH_ATTEMPT("$1", "$3", "$4", "$5", "$6", "$7") ")"
    " SELECT 1"};

// $1 owner, $2 the intent's first request id. The attempt is finished not_sent, at its own start, only
// if it is on record unfinished (the intent committed); the lease goes only if $1 still holds it. The
// attempt's truth does not depend on who holds the charge now: it never left its writer.
constexpr db::Statement kAbandonIntent{
    "charge_abandon_intent",
    R"sql(
     WITH att AS (
       UPDATE acquirer_attempts SET finished_at = started_at, outcome = 'not_sent', evidence = 'not_sent'
       WHERE request_id = $2::uuid AND attempt_no = 1 AND finished_at IS NULL
       RETURNING charge_id
     ), rel AS (
       UPDATE charges c SET owner_id = NULL, lease_expires_at = NULL FROM att
       WHERE c.id = att.charge_id AND c.owner_id = $1 AND )sql" STILL_PENDING("c") R"sql(
       RETURNING 1
     ) SELECT (SELECT count(*) FROM att), (SELECT count(*) FROM rel))sql"};

constexpr db::Statement kCountPending{
    "charge_count_pending",
    R"sql(
     SELECT count(*) FROM charges WHERE status = 'pending'
      AND created_at < now() - $1::bigint * interval '1 millisecond')sql"};

constexpr db::Statement kStatements[] = {
    kBegin, kReadByKey, kReadById, kTakeOver, kStartAttempt, kRefusalFacts,
    kFinishAttempt, kComplete, kReadByUuid, kFlagForReview, kRenewLease, kAttemptHistory, kRelease, kAbandonIntent,
    kCountPending
};

using db::PgConnection;

template <typename T, typename Job>
asio::awaitable<DbResult<T>> RunJob(db::PgPool& pool, Job job) {
  co_return co_await sql::RunJob<T>(pool, std::move(job));
}

class PgChargeStore final : public ChargeStore {
 public:
  explicit PgChargeStore(db::Database& database) : pool_(database.pool()) {}

  asio::awaitable<DbResult<BeginResult>> Begin(const NewCharge& n, const Lease& lease,
                                              const FirstAttempt& first) override {
    co_return co_await RunJob<BeginResult>(pool_, [&](PgConnection& conn) -> asio::awaitable<BeginResult> {
      const auto fingerprint = util::ToHex(n.fingerprint.data(), n.fingerprint.size());
      // One statement in autocommit: atomic, and one round trip.
      const db::PgParams params(n.merchant_id, n.idempotency_key, fingerprint, n.terms.order_id, n.terms.amount,
                                n.terms.currency, n.terms.payment_method, Nullable(n.terms.description),
                                lease.owner_id, static_cast<std::int64_t>(lease.duration.count()), n.traceparent,
                                first.request_id, std::string(acquirer::ToString(first.operation)), first.actor);
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
        if (charge.owner_id == lease.owner_id) co_return BeginResult{BeginOutcome::kCreated, charge, 1, first.request_id};
        if (charge.lease_remaining.count() > 0) co_return BeginResult{BeginOutcome::kInFlight, charge, 0};
        const auto taken = co_await conn.Execute(kTakeOver, charge.id, lease.owner_id,
                                                 static_cast<std::int64_t>(lease.duration.count()));
        if (!taken.empty()) co_return BeginResult{BeginOutcome::kTakenOver, ReadCharge(taken[0]), 0};
        // Someone else took it over or resolved it between our read and our update: look again.
      }
      throw std::runtime_error("charge for an existing idempotency key could not be read back");
    });
  }

  asio::awaitable<DbResult<StartedAttempt>> StartAttempt(const std::string& charge_id, const AttemptStart& a) override {
    const bool moves_money = a.operation == acquirer::Operation::kCapture || a.operation == acquirer::Operation::kVoid;
    // A capture or void without an owner could be sent beside another actor's: a bug, refused loudly. The
    // one exception is a person's void of a charge in review, which nothing else acts on.
    const bool persons_void = a.in_review && a.operation == acquirer::Operation::kVoid && !a.lease;
    if (a.in_review && !persons_void) co_return db::DbError{db::DbErrc::kFailed, "only a void is recorded in review"};
    if (moves_money && !a.lease && !persons_void) {
      co_return db::DbError{db::DbErrc::kFailed, "a capture or void attempt needs its owner"};
    }
    if (a.operation == acquirer::Operation::kCapture && a.deadline.count() <= 0) {
      co_return db::DbError{db::DbErrc::kFailed, "a capture attempt needs the charge's deadline"};
    }
    const std::optional<std::string> owner = a.lease ? std::optional(a.lease->owner_id) : std::nullopt;
    const auto lease_ms = static_cast<std::int64_t>(a.lease ? a.lease->duration.count() : 0);
    co_return co_await RunJob<StartedAttempt>(pool_, [&](PgConnection& conn) -> asio::awaitable<StartedAttempt> {
      const auto r = co_await conn.Execute(kStartAttempt, charge_id, a.request_id,
                                           std::string(acquirer::ToString(a.operation)), a.actor, Nullable(owner),
                                           lease_ms, static_cast<std::int64_t>(a.deadline.count()),
                                           persons_void ? "true" : "false");
      if (!r.empty()) co_return StartedAttempt{r[0][0].as<int>(), std::nullopt};
      if (persons_void) co_return StartedAttempt{0, Refusal::kNotOwner};  // a decision settled it meanwhile
      const auto facts = co_await conn.Execute(kRefusalFacts, charge_id, Nullable(owner));
      if (facts.empty()) throw std::runtime_error("no charge " + charge_id + " to record an attempt of");
      const auto row = facts[0];
      if (owner && row[0].as<int>() == 0) co_return StartedAttempt{0, Refusal::kNotOwner};
      if (row[1].as<int>() != 0) co_return StartedAttempt{0, Refusal::kVoidOnRecord};
      co_return StartedAttempt{0, Refusal::kPastDeadline};
    });
  }

  asio::awaitable<DbResult<void>> FinishAttempt(const std::string& charge_id, const AttemptFinish& a) override {
    const auto p = ToParams(a);
    co_return co_await RunJob<void>(pool_, [&](PgConnection& conn) -> asio::awaitable<void> {
      co_await conn.Execute(kFinishAttempt, charge_id, Nullable(p.attempt_no), Nullable(p.elapsed_ms),
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
    const bool capture = t.to == ChargeStatus::kCaptured;
    if (capture && t.deadline.count() <= 0) co_return db::DbError{db::DbErrc::kFailed, "a capture needs the charge's deadline"};
    const std::optional<std::string> deadline_ms =
        capture ? std::optional(std::to_string(t.deadline.count())) : std::nullopt;
    co_return co_await RunJob<CompleteResult>(pool_, [&](PgConnection& conn) -> asio::awaitable<CompleteResult> {
      const auto r = co_await conn.Execute(
          kComplete, charge_id, std::string(ToString(t.to)), Nullable(t.acquirer_capture_id),
          Nullable(t.decline_code), Nullable(t.failure_reason), Nullable(response_status), Nullable(t.response_body),
          t.traceparent, Nullable(p.attempt_no), Nullable(p.elapsed_ms), Nullable(p.outcome), Nullable(p.evidence),
          Nullable(p.http_status), Nullable(required_owner), Nullable(deadline_ms), std::string(kDatabaseTimeMark));
      if (!r.empty()) co_return CompleteResult{true, ReadCharge(r[0]), std::nullopt};
      const auto now = co_await conn.Execute(kReadByUuid, charge_id);
      if (now.empty()) throw std::runtime_error("no charge " + charge_id + " to complete");
      CompleteResult lost{false, ReadCharge(now[0]), std::nullopt};
      if (lost.charge.status != ChargeStatus::kPending) co_return lost;
      // Still pending: this transition was refused, not beaten. Say why, so the caller can act on it.
      const auto facts = co_await conn.Execute(kRefusalFacts, charge_id, Nullable(required_owner));
      const auto row = facts[0];
      if (required_owner && row[0].as<int>() == 0) {
        lost.refused = Refusal::kNotOwner;
      } else if (capture && row[1].as<int>() != 0) {
        lost.refused = Refusal::kVoidOnRecord;
      } else if (capture && row[2].as<std::int64_t>() >= t.deadline.count()) {
        lost.refused = Refusal::kPastDeadline;
      }
      co_return lost;
    });
  }

  asio::awaitable<DbResult<std::optional<Charge>>> FlagForReview(const std::string& charge_id, ChargeStatus expected,
                                                                 const std::string& reason,
                                                                 const std::string& traceparent) override {
    const std::string status(ToString(expected));
    co_return co_await RunJob<std::optional<Charge>>(
        pool_, [&](PgConnection& conn) -> asio::awaitable<std::optional<Charge>> {
          const auto r = co_await conn.Execute(kFlagForReview, charge_id, status, reason, traceparent);
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
      history.void_attempted = row[3].as<int>() != 0;
      history.capture_answered = row[4].as<std::int64_t>() > 0;
      if (!row[5].is_null()) history.first_not_found_age = std::chrono::milliseconds{row[5].as<std::int64_t>()};
      history.void_stored_errors = static_cast<int>(row[6].as<std::int64_t>());
      co_return history;
    });
  }

  asio::awaitable<DbResult<void>> Release(const std::string& charge_id, const std::string& owner_id,
                                          const std::optional<AttemptFinish>& attempt) override {
    const auto p = ToParams(attempt);
    co_return co_await RunJob<void>(pool_, [&](PgConnection& conn) -> asio::awaitable<void> {
      co_await conn.Execute(kRelease, charge_id, owner_id, Nullable(p.attempt_no), Nullable(p.elapsed_ms),
                            Nullable(p.outcome), Nullable(p.evidence), Nullable(p.http_status));
    });
  }

  asio::awaitable<DbResult<void>> AbandonIntent(const std::string& owner_id,
                                                const std::string& first_request_id) override {
    co_return co_await RunJob<void>(pool_, [&](PgConnection& conn) -> asio::awaitable<void> {
      co_await conn.Execute(kAbandonIntent, owner_id, first_request_id);
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
