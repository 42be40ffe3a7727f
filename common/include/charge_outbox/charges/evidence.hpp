// Evidence: what the acquirer's answers, and the attempts on record, prove about a pending charge. The one
// reading of acquirer evidence that charge-api and the reconciler both use, so the two can never disagree
// about the same facts (docs/charge-states.md has the table). Pure functions over plain data.
//
// The rules, in short (docs/background.md: "What each piece of evidence proves", "Never guess"):
//   - a capture under our key that matches the charge      -> captured (past the deadline: void it first)
//   - that capture already voided                          -> past the deadline our own lost void: canceled;
//                                                             before it someone else's: needs_review
//   - a capture under our key that is not ours             -> needs_review
//   - an explicit decline                                  -> failed, with its code
//   - our capture refused as a request (400/401/403/422)   -> needs_review
//   - every attempt provably never left the process        -> failed, but only for the intent's own first
//                                                             capture run, and only when no capture attempt
//                                                             on record (any actor) may have left
//   - not found by a lookup                                -> proves nothing by itself (each actor's rule)
//   - anything else (timeout, dropped, 5xx, 429, 409)      -> unanswered: stay pending
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "charge_outbox/acquirer/model.hpp"
#include "charge_outbox/acquirer/retry_policy.hpp"
#include "charge_outbox/charges/charge.hpp"
#include "charge_outbox/charges/charge_store.hpp"

namespace charge_outbox::charges {

// Failure and review reasons (charges.failure_reason and the event payload), one spelling for every actor.
namespace reason {
inline constexpr std::string_view kAcquirerUnreachable = "acquirer_unreachable";
inline constexpr std::string_view kNotCaptured = "not_captured";
inline constexpr std::string_view kCaptureMismatch = "acquirer_capture_mismatch";
inline constexpr std::string_view kCaptureVoided = "acquirer_capture_voided";
inline constexpr std::string_view kRejected = "acquirer_rejected_request";
inline constexpr std::string_view kDeadlineUnconfirmed = "deadline_passed_unconfirmed";
inline constexpr std::string_view kDeadlineVoided = "deadline_passed_voided";
inline constexpr std::string_view kVoidUnconfirmed = "void_unconfirmed";
// A person's decision out of needs_review (charge-admin review resolve --to failed|canceled).
inline constexpr std::string_view kOperatorDecision = "operator_decision";
inline constexpr std::string_view kNotFoundAtAcquirer = "not_found_at_acquirer";
}  // namespace reason

// What the run being read was for. Only the intent's first capture may conclude "nothing left".
enum class RunKind {
  kFirstCapture,  // charge-api's capture right after the intent (attempt 1 recorded with it)
  kCapture,       // any later capture with the same key: a takeover's, the reconciler's resubmit
  kLookup,        // a lookup by key
  kVoid,          // a void of the charge's capture, past the deadline
};

// One finished acquirer run, as evidence.
struct RunFacts {
  RunKind kind = RunKind::kLookup;
  acquirer::OutcomeKind last = acquirer::OutcomeKind::kNotSent;  // the run's last outcome
  std::optional<acquirer::Capture> capture;                      // kCaptured, kMismatch
  std::optional<std::string> decline_code;                       // kDeclined
  bool never_sent = false;  // every attempt of the run provably never left the process
  // Never sent, and at least one attempt only because this process's own connection pool was full: a
  // local queue, not the acquirer's answer nor its absence.
  bool queued_out = false;
};

// The facts of a finished run (RetryRun::last and RetryRun::evidence).
RunFacts FactsOf(RunKind kind, const acquirer::RetryRun& run);

// What the charge's side contributes.
struct ChargeFacts {
  bool past_deadline = false;
  // The attempts on record, read after this run's own attempts were finished on record. Needed only when
  // a first capture never left the process; absent, nothing may be concluded from "not sent".
  std::optional<AttemptHistory> history;
};

enum class Finding {
  kSettled,        // `transition` follows from the evidence, whoever reads it
  kUnanswered,     // nothing proven either way: the charge stays pending and is asked about again
  kNotVisible,     // a lookup found no capture for the key, which alone proves nothing (each actor's rule)
  kCaptureToVoid,  // a matching live capture past the deadline: reversed with the charge's key, then canceled
};

struct Reading {
  Finding finding = Finding::kUnanswered;
  Transition transition;  // kSettled: to, basis, capture id, decline code, failure reason
  std::string_view why;   // one word for logs
};

Reading ReadRun(const RunFacts& run, const ChargeFacts& charge);

// Transitions an actor concludes without a new answer from the acquirer; all Basis::kInference.
// Past the deadline with no confirmation possible.
Transition UnconfirmedPastDeadline();
// Not found on repeated looks spanning the visibility window (the reconciler's `fail` policy).
Transition NotCapturedAfterRepeatedLooks();
// Not found on repeated looks, left to a human (the reconciler's `review` policy).
Transition NotFoundForReview();
// Every capture attempt on record provably never left its process (AttemptHistory::capture_may_have_left
// is false): nothing can have been captured under the charge's key. Its client was answered at most a
// retryable failure (503, or 402 for the first run), never 202, so capturing it now would charge someone
// who may already have started over: it fails (acquirer_unreachable) instead of being resubmitted.
Transition NothingEverSent();

// When a proof this actor holds (Basis::kAcquirerAnswer) lost to a state another actor wrote first and
// that state says the opposite about the money, the reason to flag the charge for review
// ("acquirer_capture_contradicts_failed", ...); nullopt when the two agree or nothing is proven.
std::optional<std::string> Contradiction(const Transition& proven, const Charge& winner);

}  // namespace charge_outbox::charges
