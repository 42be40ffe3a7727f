// PgReviewStore: the SQL of a person's work on charges. Every operation is one statement in autocommit.
#include "charge_outbox/charges/review_store.hpp"

#include "charges/pg/charge_sql.hpp"

namespace charge_outbox::charges {
namespace {

namespace asio = boost::asio;
using db::DbResult;
using db::PgConnection;

// $1 merchant (NULL: any), $2 reason (NULL: any), $3 in review at least (ms), $4 limit. The partial index
// charges_needs_review holds these rows only. updated_at is when the charge entered needs_review: nothing
// else writes a charge in that state.
constexpr db::Statement kList{
    "review_list",
    "SELECT " CHARGE_COLUMNS ", floor(extract(epoch FROM now() - c.updated_at) * 1000)::bigint"
    R"sql(
      FROM charges c
     WHERE c.status = 'needs_review'
       AND ($1::uuid IS NULL OR c.merchant_id = $1::uuid)
       AND ($2::text IS NULL OR c.failure_reason = $2)
       AND c.updated_at <= now() - $3::bigint * interval '1 millisecond'
     ORDER BY c.updated_at, c.id
     LIMIT $4)sql"};

constexpr db::Statement kCountByReason{
    "review_count_by_reason",
    R"sql(
     SELECT COALESCE(failure_reason, ''), count(*) FROM charges WHERE status = 'needs_review'
      GROUP BY 1 ORDER BY 1)sql"};

constexpr db::Statement kFind{"review_find", "SELECT " CHARGE_COLUMNS " FROM charges c WHERE c.id = $1::uuid"};

constexpr db::Statement kFindByOrder{
    "review_find_by_order",
    "SELECT " CHARGE_COLUMNS " FROM charges c WHERE c.merchant_id = $1::uuid AND c.order_id = $2"
    " ORDER BY c.created_at DESC LIMIT 100"};

#define RFC3339(column) "rfc3339(" column ")"

constexpr db::Statement kAttempts{
    "review_attempts",
    "SELECT attempt_no, operation, actor, " RFC3339("started_at") ", " RFC3339("finished_at") ","
    " outcome, evidence::text, http_status FROM acquirer_attempts WHERE charge_id = $1::uuid ORDER BY attempt_no"};

// $1 the public id, $2 the charge's created_at: no event of it is older, so the outbox's days before it
// are never read. There is no index on aggregateid (the relay never needs one): the days since the charge
// was created are scanned, which a person's command can afford and the relay's hot path never pays.
constexpr db::Statement kEvents{
    "review_events",
    "SELECT id::text, type, sequence, " RFC3339("created_at") ", producer, " RFC3339("published_at") ", "
    RFC3339("parked_at") ", " RFC3339("skipped_at") R"sql(
      FROM (SELECT id, type, sequence, created_at, producer, published_at, parked_at, skipped_at
              FROM outbox WHERE aggregateid = $1 AND created_at >= $2::timestamptz
            UNION ALL
            SELECT id, type, sequence, created_at, producer, published_at, parked_at, skipped_at
              FROM outbox_history WHERE aggregateid = $1 AND created_at >= $2::timestamptz) e
     ORDER BY sequence, created_at)sql"};

constexpr db::Statement kActions{
    "review_actions",
    "SELECT " ACTION_COLUMNS " FROM operator_actions WHERE subject = $1 ORDER BY at, id"};

constexpr db::Statement kLastResolution{
    "review_last_resolution",
    "SELECT " ACTION_COLUMNS " FROM operator_actions WHERE subject = $1 AND action = 'review.resolve'"
    " ORDER BY at DESC, id DESC LIMIT 1"};

// $1 charge, $2 the reason it is in review as the person read it (NULL: none), $3 the new status, $4
// capture id, $5 failure reason, $6 operator, $7 why, $8 what the acquirer said, $9 against the acquirer,
// $10 traceparent, $11 the voids on record the decision saw (NULL: not read).
//
// The decision lands only while the charge is in review for the same reason and no void was recorded
// since the person read the count. The count is a column of the row: a void recorded by a racing decision
// updates the row, so this statement, if it waited on that lock, re-checks the count on the row as
// committed, where the NOT EXISTS below, read from this statement's own snapshot, would still find no void.
// A `captured` also lands only with no void on record that may have voided, as ChargeStore::Complete keeps a
// capture from landing, unless the person decides against the acquirer. Every void of a charge carries
// the charge's own key, so the latest one sent decides: answered 4xx (refused as a request: past the
// acquirer's void window, say), it proves no void under that key took effect, since one that had would
// have been replayed; unanswered, or still unfinished, it may have.
// `IS TRUE` keeps the planner on the primary key rather than the partial index charges_needs_review (as
// STILL_PENDING does for the pending one). The stored first response is dropped, as FlagForReview does: a
// replay of the key answers what the state now calls for. Each state keeps only the fields its event
// carries (schemas/events): a capture id unless failed, a decline code only if failed.
constexpr db::Statement kResolve{
    "review_resolve",
    R"sql(
     WITH upd AS (
       UPDATE charges SET status = $3::charge_status, failure_reason = $5,
         acquirer_capture_id = CASE WHEN $3::charge_status = 'failed' THEN NULL
                                    ELSE COALESCE($4, acquirer_capture_id) END,
         decline_code = CASE WHEN $3::charge_status = 'failed' THEN decline_code END,
         resolved_by = $6,
         updated_at = now(), last_sequence = last_sequence + 1,
         response_status = NULL, response_body = NULL,
         owner_id = NULL, lease_expires_at = NULL, next_check_at = NULL
       WHERE id = $1::uuid AND (status = 'needs_review') IS TRUE AND failure_reason IS NOT DISTINCT FROM $2
         AND ($11::integer IS NULL OR voids_recorded = $11::integer)
         AND ($3::charge_status <> 'captured' OR $9::boolean
              OR COALESCE((SELECT v.outcome IS NOT DISTINCT FROM 'contract_error' FROM acquirer_attempts v
                            WHERE v.charge_id = $1::uuid AND v.operation = 'void'
                              AND v.outcome IS DISTINCT FROM 'not_sent'
                            ORDER BY v.attempt_no DESC LIMIT 1), true))
       RETURNING *
     ), event AS (
       INSERT INTO outbox (id, aggregateid, type, payload, sequence, shard, traceparent, created_at)
       SELECT gen_random_uuid(), charge_public_id(upd.id), 'payments.charge.' || upd.status::text || '.v1',
              charge_event_payload(ROW(upd.*)::charges), upd.last_sequence, outbox_shard(upd.id), NULLIF($10, ''),
              upd.updated_at
       FROM upd
     ), audit AS (
       INSERT INTO operator_actions (at, operator, action, subject, reason, before, after, acquirer_said,
                                     against_acquirer)
       SELECT upd.updated_at, $6, 'review.resolve', charge_public_id(upd.id), $7,
              'needs_review' || COALESCE(' (' || $2 || ')', ''), upd.status::text, NULLIF($8, ''), $9::boolean
       FROM upd)sql"
    ") SELECT " CHARGE_COLUMNS " FROM upd c"};

// $1 older than (ms), $2 batch. Oldest first through operator_actions_at, a batch at a time so that no
// statement holds many row locks or a long transaction.
constexpr db::Statement kPruneActions{
    "review_prune_actions",
    R"sql(
     WITH gone AS (
       DELETE FROM operator_actions WHERE id IN (
         SELECT id FROM operator_actions WHERE at < now() - $1::bigint * interval '1 millisecond'
          ORDER BY at LIMIT $2)
       RETURNING 1)
     SELECT count(*) FROM gone)sql"};

constexpr db::Statement kVoidsOnRecord{"review_voids_on_record",
                                       "SELECT c.voids_recorded FROM charges c WHERE c.id = $1::uuid"};

constexpr db::Statement kStatements[] = {kPruneActions, kVoidsOnRecord, kList,   kCountByReason, kFind,           kFindByOrder, kAttempts,
                                         kEvents, kActions,       kLastResolution, kResolve};

template <typename T, typename Job>
asio::awaitable<DbResult<T>> RunJob(db::PgPool& pool, Job job) {
  co_return co_await sql::RunJob<T>(pool, std::move(job));
}

std::optional<Charge> FirstCharge(const db::PgResult& r) {
  if (r.empty()) return std::nullopt;
  return sql::ReadCharge(r[0]);
}

class PgReviewStore final : public ReviewStore {
 public:
  explicit PgReviewStore(db::Database& database) : pool_(database.pool()) {}

  asio::awaitable<DbResult<std::vector<ReviewItem>>> List(const ReviewFilter& filter) override {
    const auto older = static_cast<std::int64_t>(filter.older_than.value_or(std::chrono::milliseconds{0}).count());
    co_return co_await RunJob<std::vector<ReviewItem>>(
        pool_, [&](PgConnection& conn) -> asio::awaitable<std::vector<ReviewItem>> {
          const auto r = co_await conn.Execute(kList, filter.merchant_id, filter.reason, older, filter.limit);
          std::vector<ReviewItem> out;
          out.reserve(r.size());
          for (const auto row : r) {
            out.push_back({sql::ReadCharge(row),
                           std::chrono::milliseconds{row[sql::kChargeColumns].as<std::int64_t>()}});
          }
          co_return out;
        });
  }

  asio::awaitable<DbResult<std::vector<std::pair<std::string, std::int64_t>>>> CountByReason() override {
    using Counts = std::vector<std::pair<std::string, std::int64_t>>;
    co_return co_await RunJob<Counts>(pool_, [&](PgConnection& conn) -> asio::awaitable<Counts> {
      const auto r = co_await conn.Execute(kCountByReason);
      Counts out;
      for (const auto row : r) out.emplace_back(row[0].as<std::string>(), row[1].as<std::int64_t>());
      co_return out;
    });
  }

  asio::awaitable<DbResult<std::optional<Charge>>> Find(const std::string& charge_id) override {
    co_return co_await RunJob<std::optional<Charge>>(
        pool_, [&](PgConnection& conn) -> asio::awaitable<std::optional<Charge>> {
          const auto r = co_await conn.Execute(kFind, charge_id);
          co_return FirstCharge(r);
        });
  }

  asio::awaitable<DbResult<std::vector<Charge>>> FindByOrder(const std::string& merchant_id,
                                                            const std::string& order_id) override {
    co_return co_await RunJob<std::vector<Charge>>(
        pool_, [&](PgConnection& conn) -> asio::awaitable<std::vector<Charge>> {
          const auto r = co_await conn.Execute(kFindByOrder, merchant_id, order_id);
          std::vector<Charge> out;
          for (const auto row : r) out.push_back(sql::ReadCharge(row));
          co_return out;
        });
  }

  asio::awaitable<DbResult<ChargeHistory>> History(const Charge& charge) override {
    const auto public_id = charge.public_id();
    const auto created_at = FormatTimestamp(charge.created_at);
    co_return co_await RunJob<ChargeHistory>(pool_, [&](PgConnection& conn) -> asio::awaitable<ChargeHistory> {
      ChargeHistory h;
      // Each result named: GCC 12 destroys a temporary in a co_await expression twice.
      const auto attempts = co_await conn.Execute(kAttempts, charge.id);
      for (const auto row : attempts) {
        h.attempts.push_back({row[0].as<int>(), row[1].as<std::string>(), row[2].as<std::string>(),
                              row[3].as<std::string>(), row[4].optional<std::string>(),
                              row[5].optional<std::string>(), row[6].optional<std::string>(),
                              row[7].optional<int>()});
      }
      const auto events = co_await conn.Execute(kEvents, public_id, created_at);
      for (const auto row : events) {
        h.events.push_back({row[0].as<std::string>(), row[1].as<std::string>(), row[2].as<int>(),
                            row[3].as<std::string>(), row[4].optional<std::string>(),
                            row[5].optional<std::string>(), row[6].optional<std::string>(),
                            row[7].optional<std::string>()});
      }
      const auto actions = co_await conn.Execute(kActions, public_id);
      for (const auto row : actions) h.actions.push_back(sql::ReadAction(row));
      co_return h;
    });
  }

  asio::awaitable<DbResult<ResolveResult>> Resolve(const Resolution& d) override {
    const std::string to(ToString(d.to));
    // Named, not built in the co_await expression: GCC 12 destroys such temporaries twice.
    const std::optional<std::string> voids_seen =
        d.voids_seen ? std::optional(std::to_string(*d.voids_seen)) : std::nullopt;
    co_return co_await RunJob<ResolveResult>(pool_, [&](PgConnection& conn) -> asio::awaitable<ResolveResult> {
      const auto r = co_await conn.Execute(kResolve, d.charge_id, d.expected_reason, to, d.capture_id,
                                           d.failure_reason, d.operator_name, d.reason, d.acquirer_said,
                                           d.against_acquirer ? "true" : "false", d.traceparent, voids_seen);
      if (!r.empty()) co_return ResolveResult{true, sql::ReadCharge(r[0])};
      // Read after the refused statement, whose snapshot may predate the winner's commit.
      const auto again = co_await conn.Execute(kFind, d.charge_id);
      auto now = FirstCharge(again);
      if (!now) throw std::runtime_error("charge " + d.charge_id + " does not exist");
      co_return ResolveResult{false, std::move(*now)};
    });
  }

  asio::awaitable<DbResult<int>> VoidsOnRecord(const std::string& charge_id) override {
    co_return co_await RunJob<int>(pool_, [&](PgConnection& conn) -> asio::awaitable<int> {
      const auto r = co_await conn.Execute(kVoidsOnRecord, charge_id);
      if (r.empty()) throw std::runtime_error("charge " + charge_id + " does not exist");
      co_return r[0][0].as<int>();
    });
  }

  asio::awaitable<DbResult<std::int64_t>> PruneActions(std::chrono::milliseconds older_than, int batch) override {
    co_return co_await RunJob<std::int64_t>(pool_, [&](PgConnection& conn) -> asio::awaitable<std::int64_t> {
      const auto r = co_await conn.Execute(kPruneActions, static_cast<std::int64_t>(older_than.count()), batch);
      co_return r[0][0].as<std::int64_t>();
    });
  }

  asio::awaitable<DbResult<std::optional<OperatorAction>>> LastResolution(const std::string& public_id) override {
    co_return co_await RunJob<std::optional<OperatorAction>>(
        pool_, [&](PgConnection& conn) -> asio::awaitable<std::optional<OperatorAction>> {
          const auto r = co_await conn.Execute(kLastResolution, public_id);
          if (r.empty()) co_return std::nullopt;
          co_return sql::ReadAction(r[0]);
        });
  }

 private:
  db::PgPool& pool_;
};

}  // namespace

std::unique_ptr<ReviewStore> MakePgReviewStore(db::Database& database) {
  return std::make_unique<PgReviewStore>(database);
}

std::vector<StatementText> PgReviewStoreStatements() {
  std::vector<StatementText> out;
  for (const auto& [name, sql] : kStatements) out.push_back({name, sql});
  return out;
}

}  // namespace charge_outbox::charges
