// PgReconciliationStore: the reconciler's SQL. Every operation is one statement in autocommit, so no
// transaction (and no row lock) outlives the statement; the claim is the owner lease it writes.
#include "charge_outbox/charges/reconciliation_store.hpp"
#include "charge_outbox/util/time.hpp"
#include "charges/pg/charge_sql.hpp"

namespace charge_outbox::charges {
namespace {

namespace asio = boost::asio;
using db::DbResult;

// $1 grace (ms), $2 the cursor (created_at text), $3 limit, $4 owner, $5 lease (ms).
// The row locks of FOR UPDATE SKIP LOCKED last only as long as this statement: they keep two
// overlapping claims off the same rows, and the lease written here keeps them off afterwards (a row
// whose lease a concurrent claim just committed fails the lease test when it is re-checked).
// Ordered by created_at alone, so the partial index charges_pending_created returns rows in order and
// the scan stops at the limit (no sort). The cursor is inclusive: charges sharing the cursor's
// timestamp that this run already claimed, put off or resolved fail the other tests.
constexpr db::Statement kClaimDue{
    "reconciler_claim_due",
    R"sql(
     WITH due AS (
       SELECT id FROM charges
       WHERE status = 'pending'
         AND created_at < now() - $1::bigint * interval '1 millisecond'
         AND (next_check_at IS NULL OR next_check_at <= now())
         AND (lease_expires_at IS NULL OR lease_expires_at <= now())
         AND created_at >= $2::timestamptz
       ORDER BY created_at
       LIMIT $3
       FOR UPDATE SKIP LOCKED
     ), claimed AS (
       UPDATE charges c SET owner_id = $4, lease_expires_at = now() + $5::bigint * interval '1 millisecond'
       FROM due WHERE c.id = due.id
       RETURNING c.*)sql"
    ") SELECT " CHARGE_COLUMNS ", c.check_count, c.created_at::text"
    " FROM claimed c ORDER BY c.created_at, c.id"};

// $1 charge, $2 owner, $3 delay (ms), $4.. the attempt to finish (all NULL: none).
constexpr db::Statement kReschedule{
    "reconciler_reschedule",
    R"sql(
     WITH upd AS (
       UPDATE charges SET next_check_at = now() + $3::bigint * interval '1 millisecond',
         check_count = check_count + 1, owner_id = NULL, lease_expires_at = NULL
       WHERE id = $1 AND owner_id = $2 AND )sql" STILL_PENDING("charges") R"sql(
       RETURNING id)sql"
    "), attempt AS (" FINISH_ATTEMPT("$1", "$4", "$5", "$6", "$7", "$8") ")"
    " SELECT count(*) FROM upd"};

// $2: the grace period the owner's claims were made under. Every charge it claimed was older than that
// when claimed, so older still now: the bound keeps the scan to the pending index's old end, away from
// the entries of the charges being written right now (and of those just settled, until vacuum).
constexpr db::Statement kReleaseAll{
    "reconciler_release_all",
    R"sql(
     WITH rel AS (
       UPDATE charges SET owner_id = NULL, lease_expires_at = NULL
       WHERE owner_id = $1 AND status = 'pending'
         AND created_at < now() - $2::bigint * interval '1 millisecond' RETURNING 1
     ) SELECT count(*) FROM rel)sql"};

// $1 from, $2 to, $3 created after (Unix microseconds), $4 the visibility window (ms). Only charges
// recorded captured at least a visibility window ago: the acquirer made their capture earlier still, so
// its lookups show it by now, and a charge captured a moment ago is never taken for one missing there.
constexpr db::Statement kCapturedInWindow{
    "reconciler_captured_in_window",
    "SELECT c.id::text FROM charges c"
    R"sql(
      WHERE c.status = 'captured'
        AND c.created_at >= to_timestamp($3::bigint / 1000000.0)
        AND c.created_at < to_timestamp($2::bigint / 1000000.0)
        AND c.updated_at >= to_timestamp($1::bigint / 1000000.0)
        AND c.updated_at < now() - $4::bigint * interval '1 millisecond'
      ORDER BY c.created_at, c.id)sql"};

constexpr db::Statement kFindByIds{
    "reconciler_find_by_ids",
    "SELECT " CHARGE_COLUMNS " FROM charges c WHERE c.id = ANY($1::uuid[])"};

constexpr db::Statement kStatements[] = {kClaimDue, kReschedule, kReleaseAll, kCapturedInWindow, kFindByIds};

using db::PgConnection;

std::vector<Charge> ReadCharges(const db::PgResult& r) {
  std::vector<Charge> out;
  out.reserve(r.size());
  for (const auto row : r) out.push_back(sql::ReadCharge(row));
  return out;
}

template <typename T, typename Job>
asio::awaitable<DbResult<T>> RunJob(db::PgPool& pool, Job job) {
  co_return co_await sql::RunJob<T>(pool, std::move(job));
}

std::int64_t Millis(std::chrono::milliseconds d) { return static_cast<std::int64_t>(d.count()); }

class PgReconciliationStore final : public ReconciliationStore {
 public:
  explicit PgReconciliationStore(db::Database& database) : pool_(database.pool()) {}

  asio::awaitable<DbResult<ClaimBatch>> ClaimDue(const ClaimRequest& request) override {
    const std::string after = request.after ? request.after->created_at : "-infinity";
    co_return co_await RunJob<ClaimBatch>(pool_, [&](PgConnection& conn) -> asio::awaitable<ClaimBatch> {
      const auto r = co_await conn.Execute(kClaimDue, Millis(request.grace), after, request.limit, request.owner_id,
                                           Millis(request.lease));
      ClaimBatch batch;
      batch.charges.reserve(r.size());
      for (const auto row : r) {
        ClaimedCharge claimed;
        claimed.charge = sql::ReadCharge(row);
        claimed.check_count = row[sql::kChargeColumns].as<int>();
        batch.charges.push_back(std::move(claimed));
      }
      if (!r.empty()) batch.next = SweepCursor{r[r.size() - 1][sql::kChargeColumns + 1].as<std::string>()};
      co_return batch;
    });
  }

  asio::awaitable<DbResult<bool>> Reschedule(const std::string& charge_id, const std::string& owner_id,
                                             std::chrono::milliseconds delay,
                                             const std::optional<AttemptFinish>& attempt) override {
    const auto p = sql::ToParams(attempt);
    co_return co_await RunJob<bool>(pool_, [&](PgConnection& conn) -> asio::awaitable<bool> {
      const auto r = co_await conn.Execute(kReschedule, charge_id, owner_id, Millis(delay),
                                           sql::Nullable(p.attempt_no), sql::Nullable(p.elapsed_ms),
                                           sql::Nullable(p.outcome), sql::Nullable(p.evidence),
                                           sql::Nullable(p.http_status));
      co_return r[0][0].as<std::int64_t>() > 0;
    });
  }

  asio::awaitable<DbResult<int>> ReleaseAll(const std::string& owner_id,
                                            std::chrono::milliseconds claims_grace) override {
    co_return co_await RunJob<int>(pool_, [&](PgConnection& conn) -> asio::awaitable<int> {
      const auto r = co_await conn.Execute(kReleaseAll, owner_id, Millis(claims_grace));
      co_return static_cast<int>(r[0][0].as<std::int64_t>());
    });
  }

  asio::awaitable<DbResult<std::vector<std::string>>> FindCapturedIdsInWindow(
      Timestamp from, Timestamp to, Timestamp created_after, std::chrono::milliseconds visibility) override {
    co_return co_await RunJob<std::vector<std::string>>(
        pool_, [&](PgConnection& conn) -> asio::awaitable<std::vector<std::string>> {
          const auto rows = co_await conn.Execute(kCapturedInWindow, util::ToUnixMicros(from), util::ToUnixMicros(to),
                                                  util::ToUnixMicros(created_after), Millis(visibility));
          std::vector<std::string> ids;
          ids.reserve(rows.size());
          for (const auto row : rows) ids.push_back(row[0].as<std::string>());
          co_return ids;
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
    co_return co_await RunJob<std::vector<Charge>>(
        pool_, [&](PgConnection& conn) -> asio::awaitable<std::vector<Charge>> {
          co_return ReadCharges(co_await conn.Execute(kFindByIds, array));
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
