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
#include <vector>

#include "charge_outbox/acquirer/model.hpp"
#include "charge_outbox/charges/charge.hpp"
#include "charge_outbox/db/database.hpp"

namespace charge_outbox::charges {

struct Merchant {
  std::string id;
};

// The intent ChargeStore::Begin writes: the client's terms under its merchant and idempotency key.
struct NewCharge {
  std::string merchant_id;
  std::string idempotency_key;
  Fingerprint fingerprint{};
  ChargeTerms terms;
  std::string traceparent;
};

// Who works on a pending charge, and for how long others must leave it alone.
struct Lease {
  std::string owner_id;  // unique per request (instance and request id), so a request can recognise its own row
  std::chrono::milliseconds duration{0};
};

// The first acquirer call of a new charge, recorded as started in the intent statement. Its request id
// comes from the caller, so that a caller who never learns whether its intent committed can still name
// the attempt it never sent (ChargeStore::AbandonIntent).
struct FirstAttempt {
  std::string request_id;  // uuid, sent to the acquirer as X-Request-Id
  acquirer::Operation operation = acquirer::Operation::kCapture;
  std::string actor;
};

// Another acquirer call, recorded as started before a byte of it is sent. Every time on record is the
// database's (clock_timestamp() when the row is written), never the writing host's: the attempt history
// orders a lookup after a capture by these times, whichever host made each.
struct AttemptStart {
  std::string request_id;  // uuid, sent to the acquirer as X-Request-Id
  acquirer::Operation operation = acquirer::Operation::kCapture;
  std::string actor;  // "charge-api" or "reconciler"
  // Captures and voids move money, so only the charge's owner sends one: the attempt is recorded only
  // while `lease->owner_id` holds a live lease on the still pending charge, and recording it renews the
  // lease for `lease->duration`. Required for captures and voids; a lookup needs none.
  std::optional<Lease> lease;
  // Captures only: the charge's deadline from its creation. Past it (by the database's clock), or once a
  // void of the charge is on record, no capture is recorded, so none is sent.
  std::chrono::milliseconds deadline{0};
  // A person's void of a charge in needs_review (charge-admin), which no actor owns: recorded without a
  // lease, only while the charge is still in needs_review (refused kNotOwner once a decision settled it).
  bool in_review = false;
};

// Why an attempt was not recorded (and so must not be sent), or a transition did not land on a charge
// that is still pending.
enum class Refusal {
  kNotOwner,      // the caller's lease ran out or another actor holds the charge
  kPastDeadline,  // a capture past the charge's deadline
  kVoidOnRecord,  // a capture of a charge whose capture someone set out to void
};
std::string_view ToString(Refusal refusal);

struct StartedAttempt {
  int attempt_no = 0;              // the attempt's number on record; 0 when refused
  std::optional<Refusal> refused;  // set when nothing was recorded
};

struct AttemptFinish {
  int attempt_no = 0;
  // From the attempt's start, by the caller's monotonic clock: the database records finished_at as its
  // own started_at plus this, so no host's wall clock enters the record.
  std::chrono::milliseconds elapsed{0};
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
  int attempt_no = 0;            // kCreated: the attempt recorded as started
  std::string first_request_id;  // kCreated: its request id, to send as X-Request-Id
};

// What a transition rests on, which decides whether it may land after its actor lost the charge.
enum class Basis {
  // The acquirer's own answer (a capture, a decline, a confirmed void, a capture that is not ours): true
  // whoever holds the charge now, so it lands whenever the charge is still pending.
  kAcquirerAnswer,
  // A conclusion from absence or from the clock (nothing left the process, not found on repeated looks,
  // past the deadline unconfirmed): true only if nobody else acted meanwhile, so it lands only while
  // `owner_id` still holds the charge's lease.
  kInference,
};

// A state change out of `pending`, with what to announce and what to replay later. The charge's
// updated_at, and the created_at (ce_time) of the event announcing it, are the database's now().
struct Transition {
  ChargeStatus to = ChargeStatus::kCaptured;
  Basis basis = Basis::kAcquirerAnswer;
  std::string owner_id;  // the lease of the actor writing it; required for Basis::kInference
  std::optional<std::string> acquirer_capture_id;
  std::optional<std::string> decline_code;
  std::optional<std::string> failure_reason;
  // `captured` only: the charge's deadline from its creation. A capture lands only before it (by the
  // database's clock) and only while no void of the charge is on record; past it, the capture is the
  // acquirer's to be voided, not ours to keep.
  std::chrono::milliseconds deadline{0};
  // The response to store for replay. Rendered with updated_at at kDatabaseTimeMark: the statement puts
  // its own time there, so the stored answer, GET and the event tell one time from one clock.
  std::optional<int> response_status;
  std::optional<std::string> response_body;
  std::string traceparent;  // of the request or run that caused it
};

// The updated_at a response body carries until the transition's statement writes its own time in its
// place (charges::FormatTimestamp of the epoch). JSON escapes every quote inside a string value, so this
// field, quotes and all, can only be the body's own updated_at.
inline constexpr std::string_view kDatabaseTimeMark = R"("updated_at":"1970-01-01T00:00:00.000Z")";

struct CompleteResult {
  // false: the charge was no longer pending (someone else resolved it first), or the transition is an
  // inference and its actor no longer holds the charge, or a capture that may not land (`refused`).
  bool applied = false;
  Charge charge;  // as it is after the statement; when not applied, read afresh after the winner committed
  // Not applied to a charge still pending: why. kNotOwner for an inference whose actor lost the charge;
  // kPastDeadline or kVoidOnRecord for a capture (the acquirer's capture is then to be voided).
  std::optional<Refusal> refused;
};

// The acquirer attempts on record for a charge (any actor), as the evidence module reads them.
struct AttemptHistory {
  // Some capture attempt may have reached the acquirer: one unfinished (its process died, or its finish
  // was never written) or finished with any evidence but `not_sent`. When false, every capture attempt on
  // record provably never left its process, so nothing was ever captured under the charge's key.
  bool capture_may_have_left = false;
  // Some capture attempt is on record as answered with anything but `not_sent` (a timeout, a 5xx, a
  // capture...): the attempt left, and its actor lived to record what came back, so its client could have
  // been told `202` (a capture may be in flight). Only such a charge may be captured again without its
  // client: one whose only attempts that may have left are unfinished (its process died, or an intent's
  // commit was never confirmed) had a client that got no answer, or only a 503.
  bool capture_answered = false;
  // Some actor set out to void the charge's capture (a void attempt is on record, finished or not).
  bool void_attempted = false;
  // Void attempts answered with an error the acquirer stored under their key (acquirer::VoidRequest's
  // stored_errors_before): the next void goes under a key of its own.
  int void_stored_errors = 0;
  // Lookups answered not found after the last capture attempt that may have left, finished ones only, and
  // when the first of them started: only looks after a capture can prove that capture is not there.
  int not_found_looks = 0;
  std::optional<Timestamp> first_not_found_at;
  // How long before the read the first of those started, by the database's clock alone.
  std::optional<std::chrono::milliseconds> first_not_found_age;
};

class ChargeStore {
 public:
  virtual ~ChargeStore() = default;

  // Inserts the charge `pending` with its `initiated` event and attempt 1, or reports what exists.
  // kInDoubt: the connection died during the insert; call again with the same lease owner to learn
  // whether it committed (kCreated either way if it is ours).
  virtual boost::asio::awaitable<db::DbResult<BeginResult>> Begin(const NewCharge& charge, const Lease& lease,
                                                                  const FirstAttempt& first_attempt) = 0;

  // Records another attempt as started, unless AttemptStart's rules refuse it (then it must not be sent).
  virtual boost::asio::awaitable<db::DbResult<StartedAttempt>> StartAttempt(const std::string& charge_id,
                                                                            const AttemptStart& attempt) = 0;
  virtual boost::asio::awaitable<db::DbResult<void>> FinishAttempt(const std::string& charge_id,
                                                                   const AttemptFinish& attempt) = 0;

  // pending -> transition.to with its event (`payments.charge.<status>.v1`), finishing `attempt` in the
  // same statement. Applied only if still pending; for Basis::kInference, only while
  // `transition.owner_id` holds the charge; for `captured`, only before the deadline and with no void on
  // record. When not applied, the charge is read again after the statement (whose snapshot predates a
  // concurrent winner's commit), so the caller sees what won, or why a still pending charge refused it.
  virtual boost::asio::awaitable<db::DbResult<CompleteResult>> Complete(const std::string& charge_id,
                                                                        const Transition& transition,
                                                                        const std::optional<AttemptFinish>& attempt) = 0;

  // A charge in `expected` (captured, failed or canceled) that the acquirer's evidence contradicts ->
  // needs_review with `reason` and its `payments.charge.needs_review.v1` event, in one statement, only if
  // its status is still `expected`. The stored first response is dropped, so a replay answers what the
  // charge's state now calls for, as GET does. Returns the charge as flagged, or nullopt if its status
  // had changed.
  virtual boost::asio::awaitable<db::DbResult<std::optional<Charge>>> FlagForReview(const std::string& charge_id,
                                                                                  ChargeStatus expected,
                                                                                  const std::string& reason,
                                                                                  const std::string& traceparent) = 0;

  // Extends the lease if `owner_id` still holds the charge and it is still pending; false otherwise (it
  // was resolved, or taken over after the lease ran out), and then the caller must leave it alone. Before
  // a second acquirer operation (a takeover's capture after its lookup, the reconciler's resubmit or
  // void), so that one lease never has to cover two.
  virtual boost::asio::awaitable<db::DbResult<bool>> RenewLease(const std::string& charge_id,
                                                                const std::string& owner_id,
                                                                std::chrono::milliseconds lease) = 0;

  virtual boost::asio::awaitable<db::DbResult<AttemptHistory>> ReadAttemptHistory(const std::string& charge_id) = 0;

  // Gives up the lease (the outcome is unknown and the client got 202), finishing `attempt`, so that the
  // client's retry can take over at once instead of waiting for the lease to run out.
  virtual boost::asio::awaitable<db::DbResult<void>> Release(const std::string& charge_id, const std::string& owner_id,
                                                             const std::optional<AttemptFinish>& attempt) = 0;

  // An intent whose commit its writer never learned (the client was answered 503): if it committed, its
  // first attempt (`first_request_id`) provably never left the writer, so it is finished `not_sent`, and
  // the lease is given back if `owner_id` still holds it. Idempotent, and a no-op when the intent never
  // committed. Without it that attempt would stay unfinished, which reads as "a capture may have left",
  // and the reconciler would capture a charge whose client was only told to retry.
  virtual boost::asio::awaitable<db::DbResult<void>> AbandonIntent(const std::string& owner_id,
                                                                   const std::string& first_request_id) = 0;

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

// The exact SQL of each statement, by name ("charge_begin", "charge_complete", ...), so a benchmark can run
// the same statements through pgbench.
struct StatementText {
  const char* name;
  const char* sql;
};
std::vector<StatementText> PgChargeStoreStatements();

}  // namespace charge_outbox::charges
