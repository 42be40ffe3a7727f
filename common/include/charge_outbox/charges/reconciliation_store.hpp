// ReconciliationStore: the reconciler's statements on `charges` and `acquirer_attempts`, beside the charge
// store that owns those tables: claiming due pending charges under a short lease, giving the lease back,
// scheduling the next look, and the reads of the window report.
//
// It never changes a charge's status: that is ChargeStore (Complete() out of pending, FlagForReview() of
// a contradicted terminal charge), the one implementation of the state machine, which charge-api uses
// too. Renewing a lease and reading the attempt history are ChargeStore's as well, shared by both actors.
//
// The claim is a lease, not a transaction: ClaimDue() locks due rows with FOR UPDATE SKIP LOCKED only for
// its own statement and writes `owner_id` / `lease_expires_at`, the same lease charge-api takes for a
// request. So no transaction stays open across an acquirer call, overlapping runs take different rows,
// a charge-api retry of a claimed charge gets 409 instead of racing the reconciler, and a claim held
// by a run that died expires by itself.
//
// Thread safety: every method may be called concurrently; each runs on a pooled connection and is
// awaited without blocking the caller's I/O thread.
#pragma once

#include <boost/asio/awaitable.hpp>

#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "charge_outbox/charges/charge.hpp"
#include "charge_outbox/charges/charge_store.hpp"
#include "charge_outbox/db/database.hpp"

namespace charge_outbox::charges {

// Where a sweep is in the pending index: the created_at of the last charge it claimed. Keyset
// pagination, so one run walks the pending charges once, oldest first, and never re-reads the ones it has
// already put off (their next check is in the future) on every batch.
struct SweepCursor {
  std::string created_at;  // exactly as the database printed it, so it reads back to the same microsecond
};

struct ClaimRequest {
  std::string owner_id;                  // the run's lease owner ("reconciler/<host>/<run uuid>")
  std::chrono::milliseconds lease{0};    // how long the claim keeps charge-api and other runs away
  std::chrono::milliseconds grace{0};    // only charges older than this
  int limit = 100;                       // at most this many
  std::optional<SweepCursor> after;      // only charges from this position on; nullopt: from the oldest
};

// A pending charge this run now owns until its lease expires.
struct ClaimedCharge {
  Charge charge;
  int check_count = 0;  // how many earlier looks left it pending
};

struct ClaimBatch {
  std::vector<ClaimedCharge> charges;  // oldest first
  std::optional<SweepCursor> next;     // the position after the last one; nullopt when none was claimed
};

class ReconciliationStore {
 public:
  virtual ~ReconciliationStore() = default;

  // Claims up to `limit` pending charges older than the grace period whose next check is due and that
  // nobody holds a live lease on, oldest first from `after`, and leases them to `owner_id`.
  virtual boost::asio::awaitable<db::DbResult<ClaimBatch>> ClaimDue(const ClaimRequest& request) = 0;

  // The charge stays pending: look again `delay` from now; counts the look and gives the lease back,
  // finishing `attempt` in the same statement. False if `owner_id` no longer holds it.
  virtual boost::asio::awaitable<db::DbResult<bool>> Reschedule(const std::string& charge_id,
                                                                const std::string& owner_id,
                                                                std::chrono::milliseconds delay,
                                                                const std::optional<AttemptFinish>& attempt) = 0;

  // Gives back every lease `owner_id` still holds (charges claimed and not worked on before the run's time
  // budget ran out, or left by an error), without touching their schedule. Returns how many.
  // `claims_grace`: the grace period its claims were made under (ClaimRequest::grace), which bounds the search.
  virtual boost::asio::awaitable<db::DbResult<int>> ReleaseAll(const std::string& owner_id,
                                                               std::chrono::milliseconds claims_grace) = 0;

  // Window report: local charges whose acquirer capture may have been made in [from, to): captured,
  // created before `to`, and recorded captured at or after `from` (the capture lies between the two), and
  // at least `visibility` ago by the database's clock (so the acquirer's lookups show their capture by now).
  // `created_after` bounds the scan (a capture never comes later than the business deadline). Their ids
  // (uuids) only, in (created_at, id) order: a report holds one short string per charge, not the charge,
  // and reads the few it needs whole with FindByIds.
  virtual boost::asio::awaitable<db::DbResult<std::vector<std::string>>> FindCapturedIdsInWindow(
      Timestamp from, Timestamp to, Timestamp created_after, std::chrono::milliseconds visibility) = 0;
  // Charges by uuid, in any status; unknown ids are simply absent.
  virtual boost::asio::awaitable<db::DbResult<std::vector<Charge>>> FindByIds(const std::vector<std::string>& ids) = 0;
};

std::unique_ptr<ReconciliationStore> MakePgReconciliationStore(db::Database& database);

// The exact SQL of each statement by name ("reconciler_claim_due", ...), so the benchmark runs the claim
// through pgbench as the reconciler runs it.
std::vector<StatementText> PgReconciliationStoreStatements();

}  // namespace charge_outbox::charges
