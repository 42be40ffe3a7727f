#include "charge_outbox/charges/evidence.hpp"

#include <algorithm>

namespace charge_outbox::charges {
namespace {

using acquirer::OutcomeKind;

Reading Settled(ChargeStatus to, Basis basis, std::string_view why,
                std::optional<std::string_view> failure_reason = std::nullopt,
                std::optional<std::string> capture_id = std::nullopt) {
  Reading r;
  r.finding = Finding::kSettled;
  r.transition.to = to;
  r.transition.basis = basis;
  if (failure_reason) r.transition.failure_reason = std::string(*failure_reason);
  r.transition.acquirer_capture_id = std::move(capture_id);
  r.why = why;
  return r;
}

Reading Found(Finding finding, std::string_view why) {
  Reading r;
  r.finding = finding;
  r.why = why;
  return r;
}

std::optional<std::string> CaptureId(const RunFacts& run) {
  return run.capture ? std::optional(run.capture->id) : std::nullopt;
}

// A capture the acquirer showed us that matches the charge (amount, currency, reference).
Reading MatchingCapture(const RunFacts& run, const ChargeFacts& charge) {
  if (!run.capture) return Found(Finding::kUnanswered, "capture_without_body");
  switch (run.capture->status) {
    case acquirer::CaptureStatus::kVoided:
      // Past the deadline it is our own void, whose `canceled` a crash lost; before it, someone else's.
      if (charge.past_deadline) {
        return Settled(ChargeStatus::kCanceled, Basis::kAcquirerAnswer, "voided", reason::kDeadlineVoided,
                       run.capture->id);
      }
      return Settled(ChargeStatus::kNeedsReview, Basis::kAcquirerAnswer, "voided_before_deadline",
                     reason::kCaptureVoided, run.capture->id);
    case acquirer::CaptureStatus::kCaptured: break;
  }
  if (charge.past_deadline) return Found(Finding::kCaptureToVoid, "captured_past_deadline");
  return Settled(ChargeStatus::kCaptured, Basis::kAcquirerAnswer, "captured", std::nullopt, run.capture->id);
}

// Every attempt of this run stayed in the process. That ends the charge only if it is the intent's own
// first capture and nothing on record (any actor) may have reached the acquirer before or beside it.
Reading NeverSent(const RunFacts& run, const ChargeFacts& charge) {
  if (run.kind != RunKind::kFirstCapture) return Found(Finding::kUnanswered, "not_sent");
  // Our own queue refused it: the acquirer was never even asked, so "unreachable" would be a guess, and
  // failing the charge would burn the client's key for another client's burst.
  if (run.queued_out) return Found(Finding::kUnanswered, "not_sent_pool_busy");
  if (!charge.history || charge.history->capture_may_have_left) {
    return Found(Finding::kUnanswered, "not_sent_but_an_earlier_capture_may_have_left");
  }
  return Settled(ChargeStatus::kFailed, Basis::kInference, "never_sent", reason::kAcquirerUnreachable);
}

// Only the acquirer's void confirms one; anything else (refused, unknown, not sent) leaves the money
// possibly captured past the deadline, and only a human can settle that.
Reading ReadVoid(const RunFacts& run) {
  const auto capture_id = CaptureId(run);
  if (run.last == OutcomeKind::kVoided) {
    return Settled(ChargeStatus::kCanceled, Basis::kAcquirerAnswer, "voided", reason::kDeadlineVoided, capture_id);
  }
  return Settled(ChargeStatus::kNeedsReview, Basis::kInference, "void_unconfirmed", reason::kVoidUnconfirmed,
                 capture_id);
}

bool KeepsMoney(ChargeStatus s) { return s == ChargeStatus::kCaptured; }
bool HoldsNoMoney(ChargeStatus s) { return s == ChargeStatus::kFailed || s == ChargeStatus::kCanceled; }

}  // namespace

RunFacts FactsOf(RunKind kind, const acquirer::RetryRun& run) {
  const auto& last = run.last();
  const bool never_sent = run.evidence() == acquirer::EvidenceClass::kNotSent;
  const bool pool_full = std::any_of(run.attempts.begin(), run.attempts.end(), [](const auto& a) {
    return a.outcome.transport == acquirer::TransportStatus::kPoolTimedOut;
  });
  return RunFacts{kind, last.kind, last.capture, last.decline_code, never_sent, never_sent && pool_full};
}

Reading ReadRun(const RunFacts& run, const ChargeFacts& charge) {
  if (run.kind == RunKind::kVoid) return ReadVoid(run);
  if (run.never_sent) return NeverSent(run, charge);
  switch (run.last) {
    case OutcomeKind::kCaptured: return MatchingCapture(run, charge);
    case OutcomeKind::kMismatch:
      // The acquirer holds a capture under our key that is not what we asked for: a human decides.
      return Settled(ChargeStatus::kNeedsReview, Basis::kAcquirerAnswer, "mismatch", reason::kCaptureMismatch,
                     CaptureId(run));
    case OutcomeKind::kDeclined: {
      // Conclusive: with one idempotency key the acquirer's refusal covers every attempt of the charge.
      auto r = Settled(ChargeStatus::kFailed, Basis::kAcquirerAnswer, "declined");
      r.transition.decline_code = run.decline_code.value_or("declined");
      return r;
    }
    case OutcomeKind::kContractError:
      // A capture refused as a request (credentials, format, our key already standing for another body):
      // whether an earlier attempt captured is not proven either way. A refused lookup proves nothing.
      if (run.kind == RunKind::kLookup) return Found(Finding::kUnanswered, "lookup_refused");
      return Settled(ChargeStatus::kNeedsReview, Basis::kInference, "rejected", reason::kRejected);
    case OutcomeKind::kNotFound:
      if (run.kind == RunKind::kLookup) return Found(Finding::kNotVisible, "not_found");
      return Found(Finding::kUnanswered, "unexpected_not_found");
    case OutcomeKind::kNotSent:
    case OutcomeKind::kTimedOut:
    case OutcomeKind::kConnectionDropped:
    case OutcomeKind::kServerError:
    case OutcomeKind::kStoredError:
    case OutcomeKind::kUnavailable:
    case OutcomeKind::kThrottled:
    case OutcomeKind::kInFlight:
    case OutcomeKind::kUntrustedResponse:
    case OutcomeKind::kVoided:
    case OutcomeKind::kPage: return Found(Finding::kUnanswered, "acquirer_unknown");
  }
  return Found(Finding::kUnanswered, "acquirer_unknown");
}

Transition UnconfirmedPastDeadline() {
  return Settled(ChargeStatus::kNeedsReview, Basis::kInference, "", reason::kDeadlineUnconfirmed).transition;
}

Transition NotCapturedAfterRepeatedLooks() {
  return Settled(ChargeStatus::kFailed, Basis::kInference, "", reason::kNotCaptured).transition;
}

Transition NothingEverSent() {
  return Settled(ChargeStatus::kFailed, Basis::kInference, "", reason::kAcquirerUnreachable).transition;
}

Transition NotFoundForReview() {
  return Settled(ChargeStatus::kNeedsReview, Basis::kInference, "", reason::kNotFoundAtAcquirer).transition;
}

std::optional<std::string> Contradiction(const Transition& proven, const Charge& winner) {
  if (proven.basis != Basis::kAcquirerAnswer) return std::nullopt;
  const auto contradicts = [&](std::string_view proof) {
    return "acquirer_" + std::string(proof) + "_contradicts_" + std::string(ToString(winner.status));
  };
  switch (proven.to) {
    case ChargeStatus::kCaptured:
      if (winner.status == ChargeStatus::kCanceled && winner.acquirer_capture_id &&
          winner.acquirer_capture_id == proven.acquirer_capture_id) {
        return std::nullopt;  // the void that canceled it reversed this very capture, after it
      }
      if (HoldsNoMoney(winner.status)) return contradicts("capture");
      return std::nullopt;
    case ChargeStatus::kFailed:
      // Only a decline is a proof of "no money"; the other failures are inferences.
      if (proven.decline_code && KeepsMoney(winner.status)) return contradicts("decline");
      return std::nullopt;
    case ChargeStatus::kCanceled:
      if (KeepsMoney(winner.status)) return contradicts("void");
      return std::nullopt;
    case ChargeStatus::kPending:
    case ChargeStatus::kNeedsReview: return std::nullopt;
  }
  return std::nullopt;
}

}  // namespace charge_outbox::charges
