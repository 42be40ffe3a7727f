#include "decision.hpp"

#include <algorithm>
#include <cmath>

namespace charge_outbox::reconciler {
namespace {

using acquirer::OutcomeKind;
using charges::ChargeStatus;
using std::chrono::milliseconds;

Decision Resolve(ChargeStatus to, std::string_view why, std::optional<std::string> capture_id = std::nullopt,
                 std::optional<std::string_view> reason = std::nullopt) {
  Decision d;
  d.step = Step::kResolve;
  d.transition.to = to;
  d.transition.acquirer_capture_id = std::move(capture_id);
  if (reason) d.transition.failure_reason = std::string(*reason);
  d.why = why;
  return d;
}

Decision Defer(milliseconds delay, bool error, std::string_view why) {
  Decision d;
  d.step = Step::kDefer;
  d.defer = delay;
  d.error = error;
  d.why = why;
  return d;
}

// The next look lands just past the deadline at the latest, where the deadline rules take over.
constexpr milliseconds kPastDeadlineMargin{1000};
milliseconds CapAtDeadline(milliseconds delay, milliseconds until_deadline) {
  if (until_deadline < milliseconds{0} || delay <= until_deadline) return delay;
  return until_deadline + kPastDeadlineMargin;
}

std::optional<std::string> CaptureId(const std::optional<acquirer::Capture>& capture) {
  return capture ? std::optional(capture->id) : std::nullopt;
}

// No usable answer: wait and ask again, or escalate once the deadline has passed.
Decision Unanswered(const LookupFacts& facts, const DecisionOptions& options, acquirer::RandomSource& random,
                    std::string_view why) {
  if (facts.past_deadline) {
    return Resolve(ChargeStatus::kNeedsReview, "deadline_unconfirmed", std::nullopt, kReasonDeadlineUnconfirmed);
  }
  return Defer(CapAtDeadline(NextCheckDelay(facts.check_count, options, random), facts.until_deadline), true, why);
}

Decision NotFound(const LookupFacts& facts, const DecisionOptions& options, acquirer::RandomSource& random) {
  const auto first = facts.first_not_found_at.value_or(facts.now);
  const auto waited = std::chrono::duration_cast<milliseconds>(facts.now - first);
  const bool conclusive = facts.not_found_looks >= options.min_not_found_looks && waited >= options.visibility_window;
  if (conclusive) {
    // Past the deadline nothing is captured any more, whatever the policy: the customer's client gave up
    // long ago.
    if (facts.past_deadline || options.not_found_policy == NotFoundPolicy::kFail) {
      return Resolve(ChargeStatus::kFailed, "not_found", std::nullopt, kReasonNotCaptured);
    }
    Decision d;
    d.step = Step::kResubmit;
    d.why = "not_found_resubmit";
    return d;
  }
  if (facts.past_deadline) {
    return Resolve(ChargeStatus::kNeedsReview, "deadline_unconfirmed", std::nullopt, kReasonDeadlineUnconfirmed);
  }
  // Look again once the window has passed since the first look (so the next look can conclude), and never
  // sooner than the backoff.
  const auto window_left = std::max(milliseconds{0}, options.visibility_window - waited);
  const auto delay = std::max(window_left, NextCheckDelay(facts.check_count, options, random));
  return Defer(CapAtDeadline(delay, facts.until_deadline), false, "not_found_yet");
}

}  // namespace

std::string_view ToString(NotFoundPolicy policy) {
  switch (policy) {
    case NotFoundPolicy::kFail: return "fail";
    case NotFoundPolicy::kResubmit: return "resubmit";
  }
  return "?";
}

Decision DecideAfterLookup(const LookupFacts& facts, const DecisionOptions& options, acquirer::RandomSource& random) {
  switch (facts.kind) {
    case OutcomeKind::kCaptured: {
      if (!facts.capture) return Unanswered(facts, options, random, "capture_without_body");
      const auto& capture = *facts.capture;
      switch (capture.status) {
        case acquirer::CaptureStatus::kVoided:
          // Our own void, whose `canceled` was not recorded (the run died), or someone else's.
          if (facts.past_deadline) {
            return Resolve(ChargeStatus::kCanceled, "voided", capture.id, kReasonDeadlineVoided);
          }
          return Resolve(ChargeStatus::kNeedsReview, "voided_before_deadline", capture.id, kReasonCaptureVoided);
        case acquirer::CaptureStatus::kCaptured:
          break;
      }
      if (facts.past_deadline) {
        Decision d;
        d.step = Step::kVoid;
        d.capture_id = capture.id;
        d.why = "captured_past_deadline";
        return d;
      }
      return Resolve(ChargeStatus::kCaptured, "captured", capture.id);
    }
    case OutcomeKind::kMismatch:
      return Resolve(ChargeStatus::kNeedsReview, "mismatch", CaptureId(facts.capture), kReasonCaptureMismatch);
    case OutcomeKind::kDeclined: {
      // A lookup never answers with a decline today; if an acquirer did, it is conclusive.
      auto d = Resolve(ChargeStatus::kFailed, "declined");
      d.transition.decline_code = facts.decline_code.value_or("declined");
      return d;
    }
    case OutcomeKind::kNotFound: return NotFound(facts, options, random);
    case OutcomeKind::kContractError: return Unanswered(facts, options, random, "acquirer_refused_lookup");
    case OutcomeKind::kNotSent:
    case OutcomeKind::kTimedOut:
    case OutcomeKind::kConnectionDropped:
    case OutcomeKind::kServerError:
    case OutcomeKind::kUnavailable:
    case OutcomeKind::kThrottled:
    case OutcomeKind::kInFlight:
    case OutcomeKind::kUntrustedResponse:
    case OutcomeKind::kVoided:
    case OutcomeKind::kPage: return Unanswered(facts, options, random, "acquirer_unknown");
  }
  return Unanswered(facts, options, random, "acquirer_unknown");
}

Decision DecideAfterResubmit(const ResubmitFacts& facts, const DecisionOptions& options,
                             acquirer::RandomSource& random) {
  switch (facts.kind) {
    case OutcomeKind::kCaptured: return Resolve(ChargeStatus::kCaptured, "resubmit_captured", CaptureId(facts.capture));
    case OutcomeKind::kDeclined: {
      // The acquirer replays a decline for the same key and body: this is how a decline that a lookup
      // cannot show becomes visible.
      auto d = Resolve(ChargeStatus::kFailed, "resubmit_declined");
      d.transition.decline_code = facts.decline_code.value_or("declined");
      return d;
    }
    case OutcomeKind::kMismatch:
      return Resolve(ChargeStatus::kNeedsReview, "resubmit_mismatch", CaptureId(facts.capture), kReasonCaptureMismatch);
    case OutcomeKind::kContractError:
      // A 422 means our key already stands for another request: something exists that we cannot see.
      return Resolve(ChargeStatus::kNeedsReview, "resubmit_refused", std::nullopt, kReasonRejected);
    case OutcomeKind::kNotFound:
    case OutcomeKind::kNotSent:
    case OutcomeKind::kTimedOut:
    case OutcomeKind::kConnectionDropped:
    case OutcomeKind::kServerError:
    case OutcomeKind::kUnavailable:
    case OutcomeKind::kThrottled:
    case OutcomeKind::kInFlight:
    case OutcomeKind::kUntrustedResponse:
    case OutcomeKind::kVoided:
    case OutcomeKind::kPage:
      // Unknown again; the next look asks by key first, and its not-found window restarts from this capture.
      break;
  }
  return Defer(CapAtDeadline(NextCheckDelay(facts.check_count, options, random), facts.until_deadline), true,
               "resubmit_unknown");
}

Decision DecideAfterVoid(acquirer::OutcomeKind kind, const std::string& capture_id) {
  switch (kind) {
    case OutcomeKind::kVoided:
      return Resolve(ChargeStatus::kCanceled, "voided", capture_id, kReasonDeadlineVoided);
    case OutcomeKind::kCaptured:
    case OutcomeKind::kDeclined:
    case OutcomeKind::kNotFound:
    case OutcomeKind::kNotSent:
    case OutcomeKind::kTimedOut:
    case OutcomeKind::kConnectionDropped:
    case OutcomeKind::kServerError:
    case OutcomeKind::kUnavailable:
    case OutcomeKind::kThrottled:
    case OutcomeKind::kInFlight:
    case OutcomeKind::kUntrustedResponse:
    case OutcomeKind::kMismatch:
    case OutcomeKind::kContractError:
    case OutcomeKind::kPage:
      // The acquirer did not confirm the void (refused it, or we could not tell): the money may still be
      // captured past the deadline, and only a human can settle it.
      return Resolve(ChargeStatus::kNeedsReview, "void_unconfirmed", capture_id, kReasonVoidUnconfirmed);
  }
  return Resolve(ChargeStatus::kNeedsReview, "void_unconfirmed", capture_id, kReasonVoidUnconfirmed);
}

milliseconds NextCheckDelay(int check_count, const DecisionOptions& options, acquirer::RandomSource& random) {
  const double base = static_cast<double>(options.backoff_base.count());
  const double cap = static_cast<double>(options.backoff_max.count());
  const double ceiling = std::min(cap, base * std::exp2(std::clamp(check_count, 0, 62)));
  const double delay = ceiling / 2 + random.NextUnit() * ceiling / 2;
  return milliseconds{static_cast<std::int64_t>(delay)};
}

}  // namespace charge_outbox::reconciler
