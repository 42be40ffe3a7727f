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
  kFlagged,  // another actor's state contradicted our proof: the charge is needs_review now
};

struct Settlement {
  SettleOutcome outcome = SettleOutcome::kApplied;
  Charge charge;  // as it is now
  // The contradiction found (kFlagged; or kLost when the flag itself could not be written).
  std::optional<std::string> contradiction;
};

// `transition.owner_id` must be the actor's lease owner for Basis::kInference. A database error of
// Complete is returned; one of the review flag is logged and reported as kLost with the contradiction.
// The lines logged carry the trace id of `transition.traceparent`, the actor's span on the charge.
boost::asio::awaitable<db::DbResult<Settlement>> Settle(ChargeStore& store, const Charge& charge,
                                                        const Transition& transition,
                                                        const std::optional<AttemptFinish>& attempt);

}  // namespace charge_outbox::charges
