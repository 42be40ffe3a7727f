// PgReconciliationStore: the reconciler's SQL. Every operation is one statement in autocommit, so no
// transaction (and no row lock) outlives the statement; the claim is the owner lease it writes.
#include <pqxx/pqxx>

#include "charge_outbox/charges/reconciliation_store.hpp"
#include "charge_outbox/util/time.hpp"
#include "db/db_errors.hpp"
#include "db/pg_pool.hpp"

namespace charge_outbox::charges {
namespace {

namespace asio = boost::asio;
using db::DbResult;

// The columns of a charge the reconciler reads, in ReadCharge's order. The request fingerprint and the
// stored response are charge-api's business and stay out.
#define RECONCILER_CHARGE_COLUMNS                                                                           \
  "c.id::text, c.merchant_id::text, c.idempotency_key, c.order_id, c.amount, c.currency, c.payment_method, " \
  "c.description, c.status::text, c.acquirer_capture_id, c.decline_code, c.failure_reason, c.owner_id, "    \
  "c.last_sequence, c.attempt_count, COALESCE(c.traceparent, ''), "                                         \
  "(extract(epoch FROM c.created_at) * 1000000)::bigint, (extract(epoch FROM c.updated_at) * 1000000)::bigint"
constexpr pqxx::row::size_type kChargeColumns = 18;

constexpr const char* kClaimDue = "reconciler_claim_due";
constexpr const char* kRenewClaim = "reconciler_renew_claim";
constexpr const char* kReschedule = "reconciler_reschedule";
constexpr const char* kReleaseAll = "reconciler_release_all";
constexpr const char* kNotFoundHistory = "reconciler_not_found_history";
constexpr const char* kCapturedInWindow = "reconciler_captured_in_window";
constexpr const char* kFindByIds = "reconciler_find_by_ids";
constexpr const char* kFlagForReview = "reconciler_flag_for_review";

const std::pair<const char*, const char*> kStatements[] = {
    // $1 grace (ms), $2 the cursor (created_at text), $3 limit, $4 owner, $5 lease (ms).
    // The row locks of FOR UPDATE SKIP LOCKED last only as long as this statement: they keep two
    // overlapping claims off the same rows, and the lease written here keeps them off afterwards (a row
    // whose lease a concurrent claim just committed fails the lease test when it is re-checked).
    // Ordered by created_at alone, so the partial index charges_pending_created returns rows in order and
    // the scan stops at the limit (no sort). The cursor is inclusive: charges sharing the cursor's
    // timestamp that this run already claimed, put off or resolved fail the other tests.
    {kClaimDue,
     "WITH due AS ("
     "  SELECT id FROM charges"
     "  WHERE status = 'pending'"
     "    AND created_at < now() - $1::bigint * interval '1 millisecond'"
     "    AND (next_check_at IS NULL OR next_check_at <= now())"
     "    AND (lease_expires_at IS NULL OR lease_expires_at <= now())"
     "    AND created_at >= $2::timestamptz"
     "  ORDER BY created_at"
     "  LIMIT $3"
     "  FOR UPDATE SKIP LOCKED"
     "), claimed AS ("
     "  UPDATE charges c SET owner_id = $4, lease_expires_at = now() + $5::bigint * interval '1 millisecond'"
     "  FROM due WHERE c.id = due.id"
     "  RETURNING c.*"
     ") SELECT " RECONCILER_CHARGE_COLUMNS ", c.check_count, c.created_at::text"
     " FROM claimed c ORDER BY c.created_at, c.id"},
    {kRenewClaim,
     "UPDATE charges SET lease_expires_at = now() + $3::bigint * interval '1 millisecond'"
     " WHERE id = $1 AND owner_id = $2 AND status = 'pending' RETURNING 1"},
    // $1 charge, $2 owner, $3 delay (ms), $4.. the attempt to finish (all NULL: none).
    {kReschedule,
     "WITH upd AS ("
     "  UPDATE charges SET next_check_at = now() + $3::bigint * interval '1 millisecond',"
     "    check_count = check_count + 1, owner_id = NULL, lease_expires_at = NULL"
     "  WHERE id = $1 AND owner_id = $2 AND status = 'pending'"
     "  RETURNING id"
     "), attempt AS ("
     "  UPDATE acquirer_attempts SET finished_at = to_timestamp($5::bigint / 1000000.0), outcome = $6,"
     "    evidence = $7::evidence_class, http_status = $8::smallint"
     "  WHERE charge_id = $1 AND attempt_no = $4::integer"
     ") SELECT count(*) FROM upd"},
    {kReleaseAll,
     "WITH rel AS ("
     "  UPDATE charges SET owner_id = NULL, lease_expires_at = NULL"
     "  WHERE owner_id = $1 AND status = 'pending' RETURNING 1"
     ") SELECT count(*) FROM rel"},
    // A capture attempt with evidence not_sent provably never reached the acquirer; an unfinished one
    // (evidence NULL: its process died) may have.
    {kNotFoundHistory,
     "WITH last_capture AS ("
     "  SELECT max(started_at) AS at FROM acquirer_attempts"
     "  WHERE charge_id = $1 AND operation = 'capture' AND evidence IS DISTINCT FROM 'not_sent'"
     ") SELECT count(*), (extract(epoch FROM min(a.started_at)) * 1000000)::bigint"
     " FROM acquirer_attempts a, last_capture"
     " WHERE a.charge_id = $1 AND a.operation = 'lookup' AND a.outcome = 'not_found'"
     "   AND (last_capture.at IS NULL OR a.started_at > last_capture.at)"},
    // $1 from, $2 to, $3 created after (Unix microseconds).
    {kCapturedInWindow,
     "SELECT " RECONCILER_CHARGE_COLUMNS " FROM charges c"
     " WHERE c.status = 'captured'"
     "   AND c.created_at >= to_timestamp($3::bigint / 1000000.0)"
     "   AND c.created_at < to_timestamp($2::bigint / 1000000.0)"
     "   AND c.updated_at >= to_timestamp($1::bigint / 1000000.0)"
     " ORDER BY c.created_at, c.id"},
    {kFindByIds, "SELECT " RECONCILER_CHARGE_COLUMNS " FROM charges c WHERE c.id = ANY($1::uuid[])"},
    // $1 charge, $2 expected status, $3 reason, $4 at (Unix microseconds), $5 traceparent.
    {kFlagForReview,
     "WITH upd AS ("
     "  UPDATE charges SET status = 'needs_review', failure_reason = $3,"
     "    updated_at = to_timestamp($4::bigint / 1000000.0), last_sequence = last_sequence + 1,"
     "    owner_id = NULL, lease_expires_at = NULL, next_check_at = NULL"
     "  WHERE id = $1 AND status = $2::charge_status AND status NOT IN ('pending', 'needs_review')"
     "  RETURNING *"
     "), event AS ("
     "  INSERT INTO outbox (id, aggregateid, type, payload, sequence, shard, traceparent)"
     "  SELECT gen_random_uuid(), charge_public_id(upd.id), 'payments.charge.needs_review.v1',"
     "         charge_event_payload(ROW(upd.*)::charges), upd.last_sequence, outbox_shard(upd.id), NULLIF($5, '')"
     "  FROM upd"
     ") SELECT count(*) FROM upd"},
};

void Prepare(pqxx::connection& conn) {
  for (const auto& [name, sql] : kStatements) conn.prepare(name, sql);
}

const char* Nullable(const std::optional<std::string>& v) { return v ? v->c_str() : nullptr; }

std::optional<std::string> OptionalText(const pqxx::field& f) {
  if (f.is_null()) return std::nullopt;
  return f.as<std::string>();
}

Charge ReadCharge(const pqxx::row& row) {
  Charge c;
  c.id = row[0].as<std::string>();
  c.merchant_id = row[1].as<std::string>();
  c.idempotency_key = row[2].as<std::string>();
  c.order_id = row[3].as<std::string>();
  c.amount = row[4].as<std::int64_t>();
  c.currency = row[5].as<std::string>();
  c.payment_method = row[6].as<std::string>();
  c.description = OptionalText(row[7]);
  c.status = ParseChargeStatus(row[8].as<std::string>()).value_or(ChargeStatus::kNeedsReview);
  c.acquirer_capture_id = OptionalText(row[9]);
  c.decline_code = OptionalText(row[10]);
  c.failure_reason = OptionalText(row[11]);
  c.owner_id = OptionalText(row[12]);
  c.last_sequence = row[13].as<int>();
  c.attempt_count = row[14].as<int>();
  c.traceparent = row[15].as<std::string>();
  c.created_at = util::FromUnixMicros(row[16].as<std::int64_t>());
  c.updated_at = util::FromUnixMicros(row[17].as<std::int64_t>());
  return c;
}

std::vector<Charge> ReadCharges(const pqxx::result& r) {
  std::vector<Charge> out;
  out.reserve(r.size());
  for (const auto& row : r) out.push_back(ReadCharge(row));
  return out;
}

// Runs `job` on the pool and converts whatever it throws into a DbError.
template <typename T, typename Job>
asio::awaitable<DbResult<T>> RunJob(db::PgPool& pool, Job job) {
  try {
    co_return co_await pool.Run([&](pqxx::connection& conn) {
      Prepare(conn);
      return job(conn);
    });
  } catch (...) {
    co_return db::CurrentDbError();
  }
}

std::int64_t Millis(std::chrono::milliseconds d) { return static_cast<std::int64_t>(d.count()); }

class PgReconciliationStore final : public ReconciliationStore {
 public:
  explicit PgReconciliationStore(db::Database& database) : pool_(database.pool()) {}

  asio::awaitable<DbResult<ClaimBatch>> ClaimDue(const ClaimRequest& request) override {
    const std::string after = request.after ? request.after->created_at : "-infinity";
    co_return co_await RunJob<ClaimBatch>(pool_, [&](pqxx::connection& conn) {
      pqxx::nontransaction tx(conn);
      const auto r = tx.exec_prepared(kClaimDue, Millis(request.grace), after, request.limit, request.owner_id,
                                      Millis(request.lease));
      ClaimBatch batch;
      batch.charges.reserve(r.size());
      for (const auto& row : r) {
        ClaimedCharge claimed;
        claimed.charge = ReadCharge(row);
        claimed.check_count = row[kChargeColumns].as<int>();
        batch.charges.push_back(std::move(claimed));
      }
      if (!r.empty()) {
        const auto& last = r[r.size() - 1];
        batch.next = SweepCursor{last[kChargeColumns + 1].as<std::string>()};
      }
      return batch;
    });
  }

  asio::awaitable<DbResult<bool>> RenewClaim(const std::string& charge_id, const std::string& owner_id,
                                             std::chrono::milliseconds lease) override {
    co_return co_await RunJob<bool>(pool_, [&](pqxx::connection& conn) {
      pqxx::nontransaction tx(conn);
      return !tx.exec_prepared(kRenewClaim, charge_id, owner_id, Millis(lease)).empty();
    });
  }

  asio::awaitable<DbResult<bool>> Reschedule(const std::string& charge_id, const std::string& owner_id,
                                             std::chrono::milliseconds delay,
                                             const std::optional<AttemptFinish>& attempt) override {
    std::optional<std::string> attempt_no, finished_at, outcome, evidence, http_status;
    if (attempt) {
      attempt_no = std::to_string(attempt->attempt_no);
      finished_at = std::to_string(util::ToUnixMicros(attempt->finished_at));
      outcome = std::string(acquirer::ToString(attempt->outcome));
      evidence = std::string(acquirer::ToString(attempt->evidence));
      if (attempt->http_status) http_status = std::to_string(*attempt->http_status);
    }
    co_return co_await RunJob<bool>(pool_, [&](pqxx::connection& conn) {
      pqxx::nontransaction tx(conn);
      const auto r = tx.exec_prepared(kReschedule, charge_id, owner_id, Millis(delay), Nullable(attempt_no),
                                      Nullable(finished_at), Nullable(outcome), Nullable(evidence),
                                      Nullable(http_status));
      return r[0][0].as<std::int64_t>() > 0;
    });
  }

  asio::awaitable<DbResult<int>> ReleaseAll(const std::string& owner_id) override {
    co_return co_await RunJob<int>(pool_, [&](pqxx::connection& conn) {
      pqxx::nontransaction tx(conn);
      return static_cast<int>(tx.exec_prepared(kReleaseAll, owner_id)[0][0].as<std::int64_t>());
    });
  }

  asio::awaitable<DbResult<NotFoundHistory>> ReadNotFoundHistory(const std::string& charge_id) override {
    co_return co_await RunJob<NotFoundHistory>(pool_, [&](pqxx::connection& conn) {
      pqxx::nontransaction tx(conn);
      const auto r = tx.exec_prepared(kNotFoundHistory, charge_id);
      NotFoundHistory history;
      history.looks = static_cast<int>(r[0][0].as<std::int64_t>());
      if (!r[0][1].is_null()) history.first_look_at = util::FromUnixMicros(r[0][1].as<std::int64_t>());
      return history;
    });
  }

  asio::awaitable<DbResult<std::vector<Charge>>> FindCapturedInWindow(Timestamp from, Timestamp to,
                                                                      Timestamp created_after) override {
    co_return co_await RunJob<std::vector<Charge>>(pool_, [&](pqxx::connection& conn) {
      pqxx::nontransaction tx(conn);
      return ReadCharges(tx.exec_prepared(kCapturedInWindow, util::ToUnixMicros(from), util::ToUnixMicros(to),
                                          util::ToUnixMicros(created_after)));
    });
  }

  asio::awaitable<DbResult<std::vector<Charge>>> FindByIds(const std::vector<std::string>& ids) override {
    // A uuid[] literal; the ids come from UuidFromPublicId or the database, so they hold hex and dashes only.
    std::string array = "{";
    for (std::size_t i = 0; i < ids.size(); ++i) {
      if (i > 0) array += ',';
      array += ids[i];
    }
    array += '}';
    co_return co_await RunJob<std::vector<Charge>>(pool_, [&](pqxx::connection& conn) {
      pqxx::nontransaction tx(conn);
      return ReadCharges(tx.exec_prepared(kFindByIds, array));
    });
  }

  asio::awaitable<DbResult<bool>> FlagForReview(const std::string& charge_id, ChargeStatus expected,
                                                const std::string& reason, Timestamp at,
                                                const std::string& traceparent) override {
    const std::string status(ToString(expected));
    co_return co_await RunJob<bool>(pool_, [&](pqxx::connection& conn) {
      pqxx::nontransaction tx(conn);
      return tx.exec_prepared(kFlagForReview, charge_id, status, reason, util::ToUnixMicros(at), traceparent)[0][0]
                 .as<std::int64_t>() > 0;
    });
  }

 private:
  db::PgPool& pool_;
};

}  // namespace

std::unique_ptr<ReconciliationStore> MakePgReconciliationStore(db::Database& database) {
  return std::make_unique<PgReconciliationStore>(database);
}

std::vector<StatementText> PgReconciliationStoreStatements() {
  std::vector<StatementText> out;
  for (const auto& [name, sql] : kStatements) out.push_back({name, sql});
  return out;
}

}  // namespace charge_outbox::charges
