#include "decision.hpp"

#include <algorithm>

namespace charge_outbox::reconciler {
namespace {

using std::chrono::milliseconds;

Decision Resolve(charges::Transition transition, std::string_view why) {
  Decision d;
  d.step = Step::kResolve;
  d.transition = std::move(transition);
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

// A live capture past the deadline: void it with the charge's key.
Decision VoidIt(const std::optional<acquirer::Capture>& capture, std::string_view why) {
  Decision d;
  d.step = Step::kVoid;
  d.capture_id = capture ? capture->id : "";
  d.why = why;
  return d;
}

// The next look lands just past the deadline at the latest, where the deadline rules take over.
constexpr milliseconds kPastDeadlineMargin{1000};
milliseconds CapAtDeadline(milliseconds delay, milliseconds until_deadline) {
  if (until_deadline < milliseconds{0} || delay <= until_deadline) return delay;
  return until_deadline + kPastDeadlineMargin;
}

// No usable answer: wait and ask again, or escalate once the deadline has passed.
Decision Unanswered(const LookupFacts& facts, const DecisionOptions& options, util::RandomSource& random,
                    std::string_view why) {
  if (facts.past_deadline) return Resolve(charges::UnconfirmedPastDeadline(), "deadline_unconfirmed");
  return Defer(CapAtDeadline(NextCheckDelay(facts.check_count, options, random), facts.until_deadline), true, why);
}

Decision NotFound(const LookupFacts& facts, const DecisionOptions& options, util::RandomSource& random) {
  const auto waited = facts.not_found_for;
  const bool conclusive = facts.not_found_looks >= options.min_not_found_looks && waited >= options.visibility_window;
  if (conclusive) {
    switch (options.not_found_policy) {
      case NotFoundPolicy::kFail: return Resolve(charges::NotCapturedAfterRepeatedLooks(), "not_found");
      case NotFoundPolicy::kReview: return Resolve(charges::NotFoundForReview(), "not_found_review");
      case NotFoundPolicy::kResubmit:
        // Past the deadline nothing is captured any more: the customer's client gave up long ago.
        if (facts.past_deadline) return Resolve(charges::UnconfirmedPastDeadline(), "deadline_unconfirmed");
        // No capture attempt's answer is on record: its client got no answer (its charge-api died) or only a
        // 503 (an intent whose commit it never learned), and was never told the charge might still happen.
        // Capturing it now could charge someone who has started over; failing it would trust the lookups
        // alone. A person decides.
        if (!facts.capture_answered) return Resolve(charges::NotFoundForReview(), "not_found_unanswered");
        Decision d;
        d.step = Step::kResubmit;
        d.why = "not_found_resubmit";
        return d;
    }
  }
  if (facts.past_deadline) return Resolve(charges::UnconfirmedPastDeadline(), "deadline_unconfirmed");
  // Look again once the window has passed since the first look (so the next look can conclude), and never
  // sooner than the backoff.
  const auto window_left = std::max(milliseconds{0}, options.visibility_window - waited);
  const auto delay = std::max(window_left, NextCheckDelay(facts.check_count, options, random));
  return Defer(CapAtDeadline(delay, facts.until_deadline), false, "not_found_yet");
}

}  // namespace

std::string_view ToString(NotFoundPolicy policy) {
  switch (policy) {
    case NotFoundPolicy::kResubmit: return "resubmit";
    case NotFoundPolicy::kReview: return "review";
    case NotFoundPolicy::kFail: return "fail";
  }
  return "?";
}

Decision DecideAfterLookup(const LookupFacts& facts, const DecisionOptions& options, util::RandomSource& random) {
  const charges::RunFacts run{charges::RunKind::kLookup, facts.kind, facts.capture, facts.decline_code, false};
  const auto reading = charges::ReadRun(run, charges::ChargeFacts{facts.past_deadline, std::nullopt});
  switch (reading.finding) {
    case charges::Finding::kSettled: return Resolve(reading.transition, reading.why);
    case charges::Finding::kCaptureToVoid: return VoidIt(facts.capture, reading.why);
    case charges::Finding::kNotVisible: return NotFound(facts, options, random);
    case charges::Finding::kUnanswered: return Unanswered(facts, options, random, reading.why);
  }
  return Unanswered(facts, options, random, reading.why);
}

std::optional<Decision> DecideBeforeLookup(const charges::AttemptHistory& history) {
  if (history.capture_may_have_left) return std::nullopt;
  return Resolve(charges::NothingEverSent(), "never_sent");
}

Decision DecideAfterResubmit(const ResubmitFacts& facts, const DecisionOptions& options,
                             util::RandomSource& random) {
  // A decline that a lookup cannot show becomes visible here: the acquirer replays it for the same key
  // and body. A 422 (our key already stands for another request) goes to review. The deadline is read as
  // of the answer, by the rule charge-api reads its own captures with (charges::ReadRun).
  const charges::RunFacts run{charges::RunKind::kCapture, facts.kind, facts.capture, facts.decline_code, false};
  const auto reading = charges::ReadRun(run, charges::ChargeFacts{facts.past_deadline, std::nullopt});
  switch (reading.finding) {
    case charges::Finding::kSettled: return Resolve(reading.transition, reading.why);
    case charges::Finding::kCaptureToVoid: return VoidIt(facts.capture, reading.why);
    case charges::Finding::kNotVisible:
    case charges::Finding::kUnanswered: break;
  }
  // Unknown again; the next look asks by key first, and its not-found window restarts from this capture.
  return Defer(CapAtDeadline(NextCheckDelay(facts.check_count, options, random), facts.until_deadline), true,
               "resubmit_unknown");
}

Decision DecideAfterVoid(const VoidFacts& facts, const DecisionOptions& options, util::RandomSource& random) {
  // A void is idempotent at the acquirer (the charge's own key), and once on record no capture of the
  // charge lands any more: one that got no answer is asked again by a later run (its lookup sees the
  // capture still live past the deadline, or voided by the answer we lost), not handed to a person.
  if (retry::IsTransient(acquirer::RetryabilityOf(facts.kind))) {
    return Defer(NextCheckDelay(facts.check_count, options, random), true, "void_retry");
  }
  // A stored 500 may or may not have refunded, and its key replays it forever. The next look reads the
  // capture again: refunded, canceled; still standing, refunded under a fresh key, which cannot refund
  // twice (a capture refunded in full refuses another refund).
  if (facts.kind == acquirer::OutcomeKind::kStoredError && facts.stored_errors < kStoredVoidErrorsForReview) {
    return Defer(NextCheckDelay(facts.check_count, options, random), true, "void_stored_error");
  }
  acquirer::Capture voided;
  voided.id = facts.capture_id;
  const charges::RunFacts run{charges::RunKind::kVoid, facts.kind, voided, std::nullopt, false};
  const auto reading = charges::ReadRun(run, charges::ChargeFacts{true, std::nullopt});
  return Resolve(reading.transition, reading.why);
}

milliseconds NextCheckDelay(int check_count, const DecisionOptions& options, util::RandomSource& random) {
  return retry::Backoff(options.backoff).Delay(check_count, random);
}

}  // namespace charge_outbox::reconciler
