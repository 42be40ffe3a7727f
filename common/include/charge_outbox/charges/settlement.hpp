// Settle: the one way an actor (charge-api, the reconciler) applies a transition the evidence settled.
// The conditional transition (ChargeStore::Complete), a few retries on transient database trouble, and,
// when it loses to a state another actor wrote first that says the opposite about the money (a capture
// proven against `failed`), the charge flagged for review with the contradiction as its reason, an error
// log and the needs_review event. Proof of money is never silently dropped.
#pragma once

#include <boost/asio/awaitable.hpp>

#include <optional>
#include <string>

#include "charge_outbox/charges/charge_store.hpp"

namespace charge_outbox::charges {

enum class SettleOutcome {
  kApplied,  // the transition landed
  kLost,     // another actor's state stands (it agrees with ours, or ours was only an inference)
  kFlagged,  // another actor's state contradicted our proof: the charge is needs_review now (flagged by us
             // or, a moment earlier, by someone else)
  // Another actor's state contradicts our proof and the review flag could not be written: the record
  // still says the contradicted state. The caller must not repeat it: a client is told "under review"
  // (UnderReview), and a run counts an error, so the contradiction is not lost silently.
  kUnflagged,
  kRefused,  // the charge is still pending and refused the transition (`refusal` says why)
};

struct Settlement {
  SettleOutcome outcome = SettleOutcome::kApplied;
  Charge charge;  // as it is now
  // The contradiction found (kFlagged, kUnflagged).
  std::optional<std::string> contradiction;
  std::optional<Refusal> refusal;  // kRefused
};

// `transition.owner_id` must be the actor's lease owner for Basis::kInference. A database error of
// Complete is returned; one of the review flag is logged and reported as kUnflagged with the contradiction.
// The lines logged carry the trace id of `transition.traceparent`, the actor's span on the charge.
boost::asio::awaitable<db::DbResult<Settlement>> Settle(ChargeStore& store, const Charge& charge,
                                                        const Transition& transition,
                                                        const std::optional<AttemptFinish>& attempt);

// The charge as the people who must decide see it while a contradiction waits for its flag (kUnflagged):
// `needs_review` with the contradiction as its reason, whatever the record still says.
Charge UnderReview(Charge charge, const std::string& contradiction);

}  // namespace charge_outbox::charges
