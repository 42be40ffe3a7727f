// PgOrphanCaptureStore: the SQL of captures without a charge of ours. Every operation is one statement in
// autocommit; every change a person makes writes its audit row in that statement.
#include "charge_outbox/charges/orphan_capture_store.hpp"

#include "charge_outbox/util/time.hpp"
#include "charges/pg/charge_sql.hpp"

namespace charge_outbox::charges {
namespace {

namespace asio = boost::asio;
using db::DbResult;
using db::PgConnection;

#define ORPHAN_COLUMNS                                                                                        \
  "o.capture_id, o.idempotency_key, o.reference, o.amount, o.currency, rfc3339(o.captured_at), "             \
  "o.listed_status, rfc3339(o.window_from), rfc3339(o.window_to), rfc3339(o.first_seen_at), "               \
  "rfc3339(o.last_seen_at), o.status, o.voids_recorded, o.last_void_outcome, o.last_void_http_status, "      \
  "charge_public_id(o.adopted_charge_id), o.resolved_by, rfc3339(o.resolved_at)"

// $1 capture id, $2 its key, $3 reference, $4 amount, $5 currency, $6 its created_at (as the acquirer wrote
// it), $7 its status as listed, $8 and $9 the report's window (Unix microseconds). Seen again: only when
// and how it was last listed change.
constexpr db::Statement kRecord{
    "orphan_record",
    R"sql(
     INSERT INTO orphan_captures AS o (capture_id, idempotency_key, reference, amount, currency, captured_at,
                                       listed_status, window_from, window_to)
     VALUES ($1, $2, $3, $4::bigint, $5, $6::timestamptz, $7, to_timestamp($8::bigint / 1000000.0),
             to_timestamp($9::bigint / 1000000.0))
     ON CONFLICT (capture_id) DO UPDATE SET last_seen_at = now(), listed_status = EXCLUDED.listed_status
     RETURNING o.status)sql"};

// $1 every one (not only the open ones), $2 limit.
constexpr db::Statement kList{
    "orphan_list",
    "SELECT " ORPHAN_COLUMNS " FROM orphan_captures o WHERE ($1::boolean OR o.status = 'open')"
    " ORDER BY o.captured_at, o.capture_id LIMIT $2"};

constexpr db::Statement kFind{"orphan_find",
                              "SELECT " ORPHAN_COLUMNS " FROM orphan_captures o WHERE o.capture_id = $1"};

// $1 capture id, $2 the public id of the charge it was adopted as (NULL: none).
constexpr db::Statement kActions{
    "orphan_actions",
    "SELECT " ACTION_COLUMNS " FROM operator_actions WHERE subject = $1 OR subject = $2 ORDER BY at, id"};

constexpr db::Statement kStartVoid{
    "orphan_start_void",
    "UPDATE orphan_captures o SET voids_recorded = o.voids_recorded + 1, last_void_outcome = NULL,"
    " last_void_http_status = NULL WHERE o.capture_id = $1 AND o.status = 'open' RETURNING o.voids_recorded"};

// $1 capture id, $2 outcome, $3 HTTP status, $4 voided, $5 operator, $6 why, $7 what the acquirer said.
constexpr db::Statement kFinishVoid{
    "orphan_finish_void",
    R"sql(
     WITH o AS (
       UPDATE orphan_captures o SET last_void_outcome = $2, last_void_http_status = $3::smallint,
         status = CASE WHEN $4::boolean THEN 'voided' ELSE o.status END,
         resolved_by = CASE WHEN $4::boolean THEN $5 END,
         resolved_at = CASE WHEN $4::boolean THEN now() END
       WHERE o.capture_id = $1 AND o.status = 'open'
       RETURNING o.*
     ), audit AS (
       INSERT INTO operator_actions (operator, action, subject, reason, before, after, acquirer_said)
       SELECT $5, 'orphan.void', o.capture_id, $6, 'open', o.status, NULLIF($7, '') FROM o
     ) SELECT )sql" ORPHAN_COLUMNS " FROM o"};

// $1 capture id, $2 charge (uuid), $3 merchant, $4 the client's key, $5 order, $6 operator, $7 why, $8 what
// the acquirer said, $9 the voids on record the person read.
//
// The charge is written back as charge-api would have left it: `captured` with the capture's id, amount and
// currency, created when the acquirer captured, and its two events, `initiated` (sequence 1, the charge as
// it was pending) and `captured` (sequence 2, with the person's name as the decision's). A consumer that
// had the lost events drops these as repeats of their sequences; one that had none applies both, with no
// gap. Its request's fingerprint is unknown (the payment method and description never reached the
// acquirer's record): it is one no request can have, so a retry under the key is answered 422 naming
// the charge, whose GET shows it captured. Its payment method is unknown too, and stays empty.
constexpr db::Statement kAdopt{
    "orphan_adopt",
    R"sql(
     WITH o AS (
       UPDATE orphan_captures o SET status = 'adopted', adopted_charge_id = $2::uuid, resolved_by = $6,
         resolved_at = now()
       WHERE o.capture_id = $1 AND o.status = 'open' AND o.voids_recorded = $9::integer
         AND (o.voids_recorded = 0 OR o.last_void_outcome IS NOT DISTINCT FROM 'contract_error')
         AND EXISTS (SELECT 1 FROM merchants m WHERE m.id = $3::uuid)
         AND NOT EXISTS (SELECT 1 FROM charges c WHERE c.id = $2::uuid)
         AND NOT EXISTS (SELECT 1 FROM charges c WHERE c.merchant_id = $3::uuid AND c.idempotency_key = $4)
       RETURNING o.*
     ), ins AS (
       INSERT INTO charges (id, merchant_id, idempotency_key, request_fingerprint, order_id, amount, currency,
                            payment_method, status, acquirer_capture_id, resolved_by, last_sequence, created_at,
                            updated_at)
       SELECT $2::uuid, $3::uuid, $4, sha256(convert_to('adopted capture ' || o.capture_id, 'UTF8')), $5,
              o.amount, o.currency, '', 'captured', o.capture_id, $6, 2, o.captured_at, now()
         FROM o
       RETURNING *
     ), event AS (
       INSERT INTO outbox (id, aggregateid, type, payload, sequence, shard, created_at)
       SELECT gen_random_uuid(), charge_public_id(ins.id), e.type, e.payload, e.sequence, outbox_shard(ins.id),
              ins.updated_at
         FROM ins CROSS JOIN LATERAL (VALUES
           (1, 'payments.charge.initiated.v1',
            charge_event_payload(jsonb_populate_record(ROW(ins.*)::charges, jsonb_build_object(
              'status', 'pending', 'acquirer_capture_id', NULL, 'resolved_by', NULL, 'last_sequence', 1)))),
           (2, 'payments.charge.captured.v1', charge_event_payload(ROW(ins.*)::charges))) AS e(sequence, type, payload)
        ORDER BY e.sequence
     ), audit AS (
       INSERT INTO operator_actions (at, operator, action, subject, reason, before, after, acquirer_said)
       SELECT ins.updated_at, $6, 'orphan.adopt', charge_public_id(ins.id), $7,
              'capture_without_local_record ' || ins.acquirer_capture_id, 'captured', NULLIF($8, '')
         FROM ins
     ) SELECT )sql" CHARGE_COLUMNS " FROM ins c"};

constexpr db::Statement kChargeById{"orphan_charge_by_id", "SELECT " CHARGE_COLUMNS " FROM charges c WHERE c.id = $1::uuid"};
constexpr db::Statement kChargeByKey{
    "orphan_charge_by_key",
    "SELECT " CHARGE_COLUMNS " FROM charges c WHERE c.merchant_id = $1::uuid AND c.idempotency_key = $2"};
constexpr db::Statement kMerchantExists{"orphan_merchant_exists", "SELECT 1 FROM merchants WHERE id = $1::uuid"};

OrphanStatus ParseStatus(const std::string& s) {
  if (s == "voided") return OrphanStatus::kVoided;
  if (s == "adopted") return OrphanStatus::kAdopted;
  return OrphanStatus::kOpen;
}

OrphanCapture ReadOrphan(const db::PgRow& row) {
  OrphanCapture o;
  o.capture.id = row[0].as<std::string>();
  o.capture.idempotency_key = row[1].optional<std::string>();
  o.capture.reference = row[2].as<std::string>();
  o.capture.amount = row[3].as<std::int64_t>();
  o.capture.currency = row[4].as<std::string>();
  o.capture.created_at = row[5].as<std::string>();
  o.capture.status =
      row[6].as<std::string>() == "voided" ? acquirer::CaptureStatus::kVoided : acquirer::CaptureStatus::kCaptured;
  o.window_from = row[7].as<std::string>();
  o.window_to = row[8].as<std::string>();
  o.first_seen_at = row[9].as<std::string>();
  o.last_seen_at = row[10].as<std::string>();
  o.status = ParseStatus(row[11].as<std::string>());
  o.voids_recorded = row[12].as<int>();
  o.last_void_outcome = row[13].optional<std::string>();
  o.last_void_http_status = row[14].optional<int>();
  o.adopted_charge_id = row[15].optional<std::string>();
  o.resolved_by = row[16].optional<std::string>();
  o.resolved_at = row[17].optional<std::string>();
  return o;
}

std::optional<OrphanCapture> FirstOrphan(const db::PgResult& r) {
  if (r.empty()) return std::nullopt;
  return ReadOrphan(r[0]);
}

class PgOrphanCaptureStore final : public OrphanCaptureStore {
 public:
  explicit PgOrphanCaptureStore(db::Database& database) : pool_(database.pool()) {}

  asio::awaitable<DbResult<OrphanStatus>> Record(const acquirer::Capture& c, std::chrono::system_clock::time_point from,
                                                 std::chrono::system_clock::time_point to) override {
    const std::string listed(acquirer::ToString(c.status));
    co_return co_await sql::RunJob<OrphanStatus>(pool_, [&](PgConnection& conn) -> asio::awaitable<OrphanStatus> {
      const auto r = co_await conn.Execute(kRecord, c.id, c.idempotency_key, c.reference, c.amount, c.currency,
                                           c.created_at, listed, util::ToUnixMicros(from), util::ToUnixMicros(to));
      co_return ParseStatus(r[0][0].as<std::string>());
    });
  }

  asio::awaitable<DbResult<std::vector<OrphanCapture>>> List(bool all, int limit) override {
    co_return co_await sql::RunJob<std::vector<OrphanCapture>>(
        pool_, [&](PgConnection& conn) -> asio::awaitable<std::vector<OrphanCapture>> {
          const auto r = co_await conn.Execute(kList, all ? "true" : "false", limit);
          std::vector<OrphanCapture> out;
          for (const auto row : r) out.push_back(ReadOrphan(row));
          co_return out;
        });
  }

  asio::awaitable<DbResult<std::optional<OrphanCapture>>> Find(const std::string& capture_id) override {
    co_return co_await sql::RunJob<std::optional<OrphanCapture>>(
        pool_, [&](PgConnection& conn) -> asio::awaitable<std::optional<OrphanCapture>> {
          const auto r = co_await conn.Execute(kFind, capture_id);
          co_return FirstOrphan(r);
        });
  }

  asio::awaitable<DbResult<std::vector<OperatorAction>>> Actions(const OrphanCapture& orphan) override {
    co_return co_await sql::RunJob<std::vector<OperatorAction>>(
        pool_, [&](PgConnection& conn) -> asio::awaitable<std::vector<OperatorAction>> {
          const auto r = co_await conn.Execute(kActions, orphan.capture.id, orphan.adopted_charge_id);
          std::vector<OperatorAction> out;
          for (const auto row : r) out.push_back(sql::ReadAction(row));
          co_return out;
        });
  }

  asio::awaitable<DbResult<std::optional<int>>> StartVoid(const std::string& capture_id) override {
    co_return co_await sql::RunJob<std::optional<int>>(
        pool_, [&](PgConnection& conn) -> asio::awaitable<std::optional<int>> {
          const auto r = co_await conn.Execute(kStartVoid, capture_id);
          if (r.empty()) co_return std::nullopt;
          co_return r[0][0].as<int>();
        });
  }

  asio::awaitable<DbResult<std::optional<OrphanCapture>>> FinishVoid(const OrphanVoid& v) override {
    const std::string outcome(acquirer::ToString(v.outcome));
    const std::optional<std::string> status = v.http_status ? std::optional(std::to_string(*v.http_status)) : std::nullopt;
    const bool voided = v.outcome == acquirer::OutcomeKind::kVoided;
    co_return co_await sql::RunJob<std::optional<OrphanCapture>>(
        pool_, [&](PgConnection& conn) -> asio::awaitable<std::optional<OrphanCapture>> {
          const auto r = co_await conn.Execute(kFinishVoid, v.capture_id, outcome, status, voided ? "true" : "false",
                                               v.operator_name, v.reason, v.acquirer_said);
          co_return FirstOrphan(r);
        });
  }

  asio::awaitable<DbResult<AdoptResult>> Adopt(const Adoption& a) override {
    co_return co_await sql::RunJob<AdoptResult>(pool_, [&](PgConnection& conn) -> asio::awaitable<AdoptResult> {
      const auto r = co_await conn.Execute(kAdopt, a.capture_id, a.charge_id, a.merchant_id, a.idempotency_key,
                                           a.order_id, a.operator_name, a.reason, a.acquirer_said, a.voids_seen);
      AdoptResult out;
      if (!r.empty()) {
        out.outcome = AdoptResult::Outcome::kAdopted;
        out.charge = sql::ReadCharge(r[0]);
        co_return out;
      }
      // Why not, read after the refused statement (whose snapshot may predate what stopped it).
      const auto orphan = co_await conn.Execute(kFind, a.capture_id);
      out.orphan = FirstOrphan(orphan);
      const auto by_id = co_await conn.Execute(kChargeById, a.charge_id);
      const auto by_key = co_await conn.Execute(kChargeByKey, a.merchant_id, a.idempotency_key);
      const auto merchant = co_await conn.Execute(kMerchantExists, a.merchant_id);
      const bool unchanged = out.orphan && out.orphan->status == OrphanStatus::kOpen &&
                             out.orphan->voids_recorded == a.voids_seen;
      if (!unchanged) co_return out;  // kOrphanChanged: what it is now is in `orphan`
      if (!by_id.empty() || !by_key.empty()) {
        out.outcome = AdoptResult::Outcome::kChargeExists;
        out.charge = sql::ReadCharge(!by_id.empty() ? by_id[0] : by_key[0]);
      } else if (merchant.empty()) {
        out.outcome = AdoptResult::Outcome::kNoSuchMerchant;
      }
      co_return out;
    });
  }

 private:
  db::PgPool& pool_;
};

}  // namespace

std::unique_ptr<OrphanCaptureStore> MakePgOrphanCaptureStore(db::Database& database) {
  return std::make_unique<PgOrphanCaptureStore>(database);
}

}  // namespace charge_outbox::charges
