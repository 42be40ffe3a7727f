// What a person's decision on a charge in needs_review may do, given what the acquirer says now: the
// rule that keeps a person from writing a state the acquirer contradicts (docs/charge-states.md, "Leaving
// needs_review"). Pure: unit-tested as a table.
#pragma once

#include <optional>
#include <string>

#include "charge_outbox/acquirer/model.hpp"
#include "charge_outbox/acquirer/retry_policy.hpp"
#include "charge_outbox/charges/charge.hpp"
#include "charge_outbox/charges/evidence.hpp"

namespace charge_outbox::charge_admin {

// The acquirer's answer to a fresh lookup of the charge's key, as a person's decision reads it.
struct AcquirerView {
  enum class Kind {
    kLiveCapture,    // a capture of the charge's amount and currency, not voided: money taken
    kVoidedCapture,  // that capture, voided: money taken and given back
    kNotFound,       // no capture visible under the key (which a capture still invisible also gives)
    kMismatch,       // a capture under the key that is not this charge's (amount, currency, reference)
    kUnanswered,     // no usable answer: nothing is known
  };
  Kind kind = Kind::kUnanswered;
  std::optional<acquirer::Capture> capture;
  std::string words;  // what the acquirer said, in one line, for the person and the audit row
};

AcquirerView ReadLookup(const acquirer::RetryRun& lookup);

struct Verdict {
  enum class Step {
    kResolve,          // write the decision
    kVoidThenResolve,  // void the live capture, and write `canceled` only once the acquirer confirms it
    kRefuse,           // nothing changes; `why` says what the acquirer contradicts and what would not
  };
  Step step = Step::kRefuse;
  std::optional<std::string> capture_id;      // the decision's capture (captured, canceled)
  std::optional<std::string> failure_reason;  // failed and canceled: kOperatorDecision
  std::string why;
};

// The failure_reason of a charge a person moved to failed or canceled.
inline constexpr const char* kOperatorDecision = charges::reason::kOperatorDecision.data();

// `to` is captured, failed or canceled. `against_acquirer`: the person overrides what the acquirer says
// (a reason is then on record); a canceled over a live capture still voids it first.
Verdict Decide(charges::ChargeStatus to, const AcquirerView& said, bool against_acquirer);

// What a void answered: kVoided confirms it; anything else leaves the charge as it was.
bool VoidConfirmed(const acquirer::RetryRun& run);

}  // namespace charge_outbox::charge_admin
