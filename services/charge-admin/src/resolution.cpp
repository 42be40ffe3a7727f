#include "resolution.hpp"

namespace charge_outbox::charge_admin {
namespace {

using charges::ChargeStatus;
using Kind = AcquirerView::Kind;

std::string Describe(const acquirer::Capture& c) {
  return "capture " + c.id + " of " + std::to_string(c.amount) + " " + c.currency + " for " + c.reference;
}

Verdict Refuse(std::string why) { return {Verdict::Step::kRefuse, std::nullopt, std::nullopt, std::move(why)}; }

std::optional<std::string> CaptureId(const AcquirerView& said) {
  return said.capture ? std::optional(said.capture->id) : std::nullopt;
}

}  // namespace

AcquirerView ReadLookup(const acquirer::RetryRun& lookup) {
  const auto& last = lookup.last();
  AcquirerView view;
  switch (last.kind) {
    case acquirer::OutcomeKind::kCaptured:
      view.capture = last.capture;
      if (last.capture && last.capture->status == acquirer::CaptureStatus::kVoided) {
        view.kind = Kind::kVoidedCapture;
        view.words = "a voided " + Describe(*last.capture);
      } else {
        view.kind = Kind::kLiveCapture;
        view.words = last.capture ? "a live " + Describe(*last.capture) : "a live capture";
      }
      return view;
    case acquirer::OutcomeKind::kMismatch:
      view.kind = Kind::kMismatch;
      view.capture = last.capture;
      view.words = last.capture ? "a " + Describe(*last.capture) + " that is not this charge's" : "a capture that is not this charge's";
      return view;
    case acquirer::OutcomeKind::kNotFound:
      view.kind = Kind::kNotFound;
      view.words = "no capture under the charge's key (404)";
      return view;
    case acquirer::OutcomeKind::kDeclined:
    case acquirer::OutcomeKind::kVoided:
    case acquirer::OutcomeKind::kPage:
    case acquirer::OutcomeKind::kNotSent:
    case acquirer::OutcomeKind::kTimedOut:
    case acquirer::OutcomeKind::kConnectionDropped:
    case acquirer::OutcomeKind::kServerError:
    case acquirer::OutcomeKind::kStoredError:
    case acquirer::OutcomeKind::kUnavailable:
    case acquirer::OutcomeKind::kThrottled:
    case acquirer::OutcomeKind::kInFlight:
    case acquirer::OutcomeKind::kUntrustedResponse:
    case acquirer::OutcomeKind::kContractError:
      break;
  }
  view.kind = Kind::kUnanswered;
  view.words = "no usable answer (" + std::string(acquirer::ToString(last.kind)) +
               (last.http_status ? " " + std::to_string(*last.http_status) : std::string()) + ")";
  return view;
}

Verdict Decide(ChargeStatus to, const AcquirerView& said, bool against_acquirer) {
  const auto resolve = [&](std::optional<std::string> capture_id, std::string why) {
    return Verdict{Verdict::Step::kResolve, std::move(capture_id),
                   to == ChargeStatus::kCaptured ? std::nullopt : std::optional<std::string>(kOperatorDecision),
                   std::move(why)};
  };
  const auto overridden = [&](const std::string& contradiction) {
    if (against_acquirer) return resolve(CaptureId(said), "against the acquirer, which says " + said.words);
    return Refuse(contradiction + " (the acquirer says " + said.words +
                  "); nothing changed. --against-acquirer REASON overrides it, on record");
  };
  switch (to) {
    case ChargeStatus::kCaptured:
      if (said.kind == Kind::kLiveCapture) return resolve(CaptureId(said), "the acquirer holds the capture");
      return overridden("captured needs a live capture at the acquirer");
    case ChargeStatus::kFailed:
      if (said.kind == Kind::kNotFound) return resolve(std::nullopt, "the acquirer holds no capture");
      if (said.kind == Kind::kVoidedCapture) {
        return overridden("the acquirer's capture of this charge was voided: that is canceled, not failed");
      }
      if (said.kind == Kind::kLiveCapture) {
        return overridden("failed would say no money was taken while a capture is live; choose canceled to "
                          "void it, or captured");
      }
      return overridden("failed needs the acquirer to show no live capture");
    case ChargeStatus::kCanceled:
      if (said.kind == Kind::kLiveCapture) {
        return {Verdict::Step::kVoidThenResolve, CaptureId(said), kOperatorDecision,
                "the live capture is voided first"};
      }
      if (said.kind == Kind::kVoidedCapture) return resolve(CaptureId(said), "the acquirer's capture is voided");
      if (said.kind == Kind::kNotFound) {
        return overridden("canceled needs a capture that is or can be voided; with none, choose failed");
      }
      return overridden("canceled needs the acquirer's capture of this charge");
    case ChargeStatus::kPending:
    case ChargeStatus::kNeedsReview:
      break;
  }
  return Refuse("a charge leaves needs_review only to captured, failed or canceled");
}

bool VoidConfirmed(const acquirer::RetryRun& run) { return run.last().kind == acquirer::OutcomeKind::kVoided; }

}  // namespace charge_outbox::charge_admin
