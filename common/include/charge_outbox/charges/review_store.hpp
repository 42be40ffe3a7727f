// ReviewStore: what a person needs to find, understand and decide a charge the product handed to them
// (`needs_review`), and the one statement by which that decision lands: the new state, its event and the
// audit row, together (docs/charge-states.md, "Leaving needs_review"). charge-admin is its caller.
//
// It sits beside the charge store that owns `charges`, `acquirer_attempts` and the outbox's inserts, and
// shares its codec; it owns `operator_actions`. Acquirer calls a person's decision needs (a fresh lookup,
// a void) are recorded with ChargeStore::StartAttempt like every actor's.
//
// Thread safety: every method may be called concurrently; each runs on a pooled connection.
#pragma once

#include <boost/asio/awaitable.hpp>

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "charge_outbox/charges/charge.hpp"
#include "charge_outbox/charges/charge_store.hpp"
#include "charge_outbox/db/database.hpp"

namespace charge_outbox::charges {

struct ReviewFilter {
  std::optional<std::string> merchant_id;           // a merchant's uuid
  std::optional<std::string> reason;                // a failure_reason
  std::optional<std::chrono::milliseconds> older_than;  // in review at least this long
  int limit = 100;
};

struct ReviewItem {
  Charge charge;
  std::chrono::milliseconds in_review_for{0};  // since it entered needs_review, by the database's clock
};

// One acquirer call on record (acquirer_attempts). Times are RFC 3339, as the database printed them.
struct AttemptRow {
  int attempt_no = 0;
  std::string operation;  // capture, lookup, void
  std::string actor;      // charge-api, reconciler, charge-admin
  std::string started_at;
  std::optional<std::string> finished_at;  // unset: its process died, or its finish was never written
  std::optional<std::string> outcome;
  std::optional<std::string> evidence;
  std::optional<int> http_status;
};

// One outbox event of the charge: a state change, and whether consumers have it.
struct EventRow {
  std::string id;
  std::string type;
  int sequence = 0;
  std::string created_at;
  std::optional<std::string> producer;  // the daemon that wrote it
  std::optional<std::string> published_at;
  std::optional<std::string> parked_at;
  std::optional<std::string> skipped_at;
};

// One action of a person (operator_actions).
struct OperatorAction {
  std::string at;
  std::string operator_name;
  std::string action;  // review.resolve, parked.retry, parked.skip
  std::string subject;
  std::string reason;
  std::optional<std::string> before;
  std::optional<std::string> after;
  std::optional<std::string> acquirer_said;
  bool against_acquirer = false;
};

struct ChargeHistory {
  std::vector<AttemptRow> attempts;  // in attempt order
  std::vector<EventRow> events;      // in sequence order
  std::vector<OperatorAction> actions;
};

// A person's decision: needs_review -> `to` (captured, failed or canceled).
struct Resolution {
  std::string charge_id;  // uuid
  // The reason the charge is in review as the person read it: the decision lands only on that.
  std::optional<std::string> expected_reason;
  ChargeStatus to = ChargeStatus::kFailed;
  std::optional<std::string> capture_id;      // the acquirer's capture (captured, canceled)
  std::optional<std::string> failure_reason;  // failed, canceled
  std::string operator_name;
  std::string reason;
  std::string acquirer_said;
  bool against_acquirer = false;
  std::string traceparent;  // "" for none
  // The voids of the charge on record as the person read them before asking the acquirer (plus this
  // decision's own): the decision lands only if no other void was recorded since (another person's
  // `canceled` racing this one), so it never rests on an answer a void has since made stale.
  std::optional<int> voids_seen;
};

struct ResolveResult {
  bool applied = false;
  Charge charge;  // as it is after the statement: resolved by this one, or as another actor left it
};

class ReviewStore {
 public:
  virtual ~ReviewStore() = default;

  // Charges in needs_review, the longest in review first.
  virtual boost::asio::awaitable<db::DbResult<std::vector<ReviewItem>>> List(const ReviewFilter& filter) = 0;
  // Charges in needs_review by reason: the charges_needs_review gauge.
  virtual boost::asio::awaitable<db::DbResult<std::vector<std::pair<std::string, std::int64_t>>>> CountByReason() = 0;

  // Any charge, by its uuid (whatever its merchant); a merchant's charges for one order, newest first (by
  // key: ChargeStore::FindByKey).
  virtual boost::asio::awaitable<db::DbResult<std::optional<Charge>>> Find(const std::string& charge_id) = 0;
  virtual boost::asio::awaitable<db::DbResult<std::vector<Charge>>> FindByOrder(const std::string& merchant_id,
                                                                               const std::string& order_id) = 0;

  virtual boost::asio::awaitable<db::DbResult<ChargeHistory>> History(const Charge& charge) = 0;

  // The decision, its `payments.charge.<to>.v1` event (with the person's name) and its audit row, in one
  // statement, only while the charge is in needs_review for `expected_reason`, and a `captured` only with
  // no void on record that may have voided (unless against the acquirer): none sent, or the latest sent
  // refused as a request (4xx). Not applied: another decision (or
  // actor) won, or a void stands in the way, and `charge` says what the charge is now.
  virtual boost::asio::awaitable<db::DbResult<ResolveResult>> Resolve(const Resolution& resolution) = 0;

  // The voids of the charge on record (charges.voids_recorded): what a decision rests on.
  virtual boost::asio::awaitable<db::DbResult<int>> VoidsOnRecord(const std::string& charge_id) = 0;

  // Deletes up to `batch` audit rows older than `older_than`, oldest first; returns how many. The retention
  // rule (docs/operations.md, "The audit trail"): called until it returns 0.
  virtual boost::asio::awaitable<db::DbResult<std::int64_t>> PruneActions(std::chrono::milliseconds older_than,
                                                                          int batch) = 0;

  // The last resolution on record for the charge (public id), if any: what won a race.
  virtual boost::asio::awaitable<db::DbResult<std::optional<OperatorAction>>> LastResolution(
      const std::string& public_id) = 0;
};

std::unique_ptr<ReviewStore> MakePgReviewStore(db::Database& database);

// The exact SQL of each statement, by name, as PgChargeStoreStatements() gives the charge store's.
std::vector<StatementText> PgReviewStoreStatements();

}  // namespace charge_outbox::charges
