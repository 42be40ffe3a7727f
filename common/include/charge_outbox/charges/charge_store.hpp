// ChargeStore: every statement that touches merchants, api_keys, charges and acquirer_attempts, and the
// outbox inserts that announce a charge's state changes (in the same transaction as the change).
//
// charge-api and the reconciler both move charges through Complete(): a conditional update
// (`WHERE status = 'pending'`) and its outbox event in one statement, so when they race exactly one
// wins and exactly one terminal event is written.
//
// Thread safety: every method may be called concurrently; each runs on a pooled connection and is
// awaited without blocking the caller's I/O thread.
#pragma once

#include <boost/asio/awaitable.hpp>

#include <chrono>
#include <optional>
#include <string>

#include "charge_outbox/acquirer/model.hpp"
#include "charge_outbox/charges/charge.hpp"
#include "charge_outbox/db/database.hpp"

namespace charge_outbox::charges {

struct Merchant {
  std::string id;
};

struct NewCharge {
  std::string merchant_id;
  std::string idempotency_key;
  Fingerprint fingerprint{};
  std::string order_id;
  std::int64_t amount = 0;
  std::string currency;
  std::string payment_method;
  std::optional<std::string> description;
  std::string traceparent;
};

// Who works on a pending charge, and for how long others must leave it alone.
struct Lease {
  std::string owner_id;  // unique per request (instance and request id), so a request can recognise its own row
  std::chrono::milliseconds duration{0};
};

// The first acquirer call of a new charge, recorded as started in the intent transaction.
struct AttemptStart {
  std::string request_id;  // uuid, sent to the acquirer as X-Request-Id
  acquirer::Operation operation = acquirer::Operation::kCapture;
  std::string actor;  // "charge-api" or "reconciler"
  Timestamp started_at{};
};

struct AttemptFinish {
  int attempt_no = 0;
  Timestamp finished_at{};
  acquirer::OutcomeKind outcome = acquirer::OutcomeKind::kNotSent;
  acquirer::EvidenceClass evidence = acquirer::EvidenceClass::kUnknown;
  std::optional<int> http_status;
};

enum class BeginOutcome {
  kCreated,              // inserted: this caller owns it; attempt 1 is recorded as started
  kFingerprintMismatch,  // the key exists with other parameters: 422, nothing changes
  kFinished,             // the charge is terminal: replay (stored response or the charge as it is)
  kInFlight,             // pending, and another owner's lease is live: 409 with Retry-After
  kTakenOver,            // pending, its owner gone: this caller owns it now and must find out what happened
};

struct BeginResult {
  BeginOutcome outcome = BeginOutcome::kCreated;
  Charge charge;
  int attempt_no = 0;  // kCreated: the attempt recorded as started
};

// A state change out of `pending`, with what to announce and what to replay later.
struct Transition {
  ChargeStatus to = ChargeStatus::kCaptured;
  std::optional<std::string> acquirer_capture_id;
  std::optional<std::string> decline_code;
  std::optional<std::string> failure_reason;
  Timestamp at{};  // becomes updated_at; the caller renders its response with it
  std::optional<int> response_status;
  std::optional<std::string> response_body;
  std::string traceparent;  // of the request or run that caused it
};

struct CompleteResult {
  bool applied = false;  // false: the charge was no longer pending (someone else resolved it first)
  Charge charge;         // as it is after the statement
};

class ChargeStore {
 public:
  virtual ~ChargeStore() = default;

  virtual boost::asio::awaitable<db::DbResult<std::optional<Merchant>>> Authenticate(const std::string& api_key) = 0;

  // Inserts the charge `pending` with its `initiated` event and attempt 1, or reports what exists.
  // kInDoubt: the connection died during the insert; call again with the same lease owner to learn
  // whether it committed (kCreated either way if it is ours).
  virtual boost::asio::awaitable<db::DbResult<BeginResult>> Begin(const NewCharge& charge, const Lease& lease,
                                                                  const AttemptStart& first_attempt) = 0;

  // Records another attempt as started; returns its number.
  virtual boost::asio::awaitable<db::DbResult<int>> StartAttempt(const std::string& charge_id,
                                                                 const AttemptStart& attempt) = 0;
  virtual boost::asio::awaitable<db::DbResult<void>> FinishAttempt(const std::string& charge_id,
                                                                   const AttemptFinish& attempt) = 0;

  // pending -> transition.to with its event (`payments.charge.<status>.v1`), finishing `attempt` in the
  // same statement. Applied only if still pending.
  virtual boost::asio::awaitable<db::DbResult<CompleteResult>> Complete(const std::string& charge_id,
                                                                        const Transition& transition,
                                                                        const std::optional<AttemptFinish>& attempt) = 0;

  // Gives up the lease (the outcome is unknown and the client got 202), finishing `attempt`, so that the
  // client's retry can take over at once instead of waiting for the lease to run out.
  virtual boost::asio::awaitable<db::DbResult<void>> Release(const std::string& charge_id, const std::string& owner_id,
                                                             const std::optional<AttemptFinish>& attempt) = 0;

  virtual boost::asio::awaitable<db::DbResult<std::optional<Charge>>> FindById(const std::string& merchant_id,
                                                                               const std::string& charge_id) = 0;
  virtual boost::asio::awaitable<db::DbResult<std::optional<Charge>>> FindByKey(const std::string& merchant_id,
                                                                                const std::string& idempotency_key) = 0;

  // Pending charges older than `older_than`: the charges_pending_overdue gauge.
  virtual boost::asio::awaitable<db::DbResult<std::int64_t>> CountPendingOlderThan(
      std::chrono::milliseconds older_than) = 0;
};

// SHA-256 of the key's bytes, as api_keys.key_hash stores it.
Fingerprint HashApiKey(const std::string& api_key);

// Prepares its statements on each pooled connection as it first uses it.
std::unique_ptr<ChargeStore> MakePgChargeStore(db::Database& database);

}  // namespace charge_outbox::charges
