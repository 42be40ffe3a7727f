// What the charge store and the reconciliation store share in SQL: the one codec of a `charges` row, the
// finishing of an attempt folded into another statement, and running a statement on the pool. Internal
// (it exposes libpq); included by common/src/charges only.
#pragma once

#include <boost/asio/awaitable.hpp>

#include <optional>
#include <string>
#include <type_traits>

#include "charge_outbox/charges/charge.hpp"
#include "charge_outbox/charges/charge_store.hpp"
#include "charge_outbox/charges/review_store.hpp"
#include "db/db_errors.hpp"
#include "db/pg_pool.hpp"
#include "db/statement.hpp"

namespace charge_outbox::charges::sql {

// Every read of a charge returns these columns of `charges c`, in this order (see ReadCharge).
#define CHARGE_COLUMNS                                                                                         \
  "c.id::text, c.merchant_id::text, c.idempotency_key, encode(c.request_fingerprint, 'hex'), c.order_id, "    \
  "c.amount, c.currency, c.payment_method, c.description, c.status::text, c.acquirer_capture_id, "            \
  "c.decline_code, c.failure_reason, c.owner_id, "                                                           \
  "COALESCE(GREATEST(0, ceil(extract(epoch FROM c.lease_expires_at - now()) * 1000)), 0)::bigint, "          \
  "c.response_status, convert_from(c.response_body, 'UTF8'), c.last_sequence, c.attempt_count, "            \
  "COALESCE(c.traceparent, ''), (extract(epoch FROM c.created_at) * 1000000)::bigint, "                     \
  "(extract(epoch FROM c.updated_at) * 1000000)::bigint, "                                                   \
  "floor(extract(epoch FROM now() - c.created_at) * 1000)::bigint"
inline constexpr int kChargeColumns = 23;

// The test of a statement that names one charge by id and acts only while it is pending (`c` is the
// table's name or alias in that statement). Never a plain `c.status = 'pending'` there: the planner proves
// that it implies the predicate of charges_pending_created, and then prefers reading that whole partial
// index (it looks a page or two) to one probe of the primary key. The index is small only while its dead
// entries go: every charge that left `pending` while a snapshot older than it stays open (a pg_dump, a
// report) keeps its entry, and each completion walked them all. Measured 3 December: pgbench of the charge
// flow at 500/s beside one REPEATABLE READ snapshot held 30 s, the completion took 2.4 ms against 0.23 ms,
// and PostgreSQL used 2.1-2.2 times the CPU. `IS TRUE` is the same test (status is never NULL) that the
// planner does not match against the index's predicate. Tested: ChargeStorePlansTest.
#define STILL_PENDING(c) "(" c ".status = 'pending') IS TRUE"

// The finishing of an attempt, folded into another statement: a no-op when `no` is NULL. `elapsed` is the
// attempt's duration in milliseconds by its caller's monotonic clock, added to the database's own
// started_at: no host's wall clock is on record.
#define FINISH_ATTEMPT(charge, no, elapsed, outcome, evidence, status)                                        \
  "UPDATE acquirer_attempts SET finished_at = started_at + " elapsed "::bigint * interval '1 millisecond', "  \
  "outcome = " outcome ", evidence = " evidence "::evidence_class, http_status = " status "::smallint "       \
  "WHERE charge_id = " charge " AND attempt_no = " no "::integer"

// The charge in CHARGE_COLUMNS starting at column `first` of `row`.
Charge ReadCharge(const db::PgRow& row, int first = 0);

// Every read of a person's action returns these columns of `operator_actions`, in this order.
#define ACTION_COLUMNS                                                                                     \
  "rfc3339(at), operator, action, subject, reason, before, after, acquirer_said, against_acquirer::int"

// The action in ACTION_COLUMNS.
OperatorAction ReadAction(const db::PgRow& row);

inline const char* Nullable(const std::optional<std::string>& v) { return v ? v->c_str() : nullptr; }

// The parameters of FINISH_ATTEMPT, all NULL when there is no attempt to finish.
struct FinishParams {
  std::optional<std::string> attempt_no, elapsed_ms, outcome, evidence, http_status;
};
FinishParams ToParams(const std::optional<AttemptFinish>& attempt);

// Runs `job(connection)`, a coroutine, with a connection of the pool, and converts whatever it throws into
// a DbError.
template <typename T, typename Job>
boost::asio::awaitable<db::DbResult<T>> RunJob(db::PgPool& pool, Job job) {
  try {
    if constexpr (std::is_void_v<T>) {
      co_await pool.Run(std::move(job));
      co_return db::DbResult<T>{};
    } else {
      co_return co_await pool.Run(std::move(job));
    }
  } catch (...) {
    co_return db::CurrentDbError();
  }
}

}  // namespace charge_outbox::charges::sql
