// The reconciler's decision table, row by row (docs/reconciler.md), with a fixed clock and random source.
#include <gtest/gtest.h>

#include "decision.hpp"

namespace charge_outbox::reconciler {
namespace {

using namespace std::chrono_literals;
using acquirer::OutcomeKind;
using charges::ChargeStatus;

class FixedRandom final : public util::RandomSource {
 public:
  explicit FixedRandom(double value) : value_(value) {}
  double NextUnit() override { return value_; }

 private:
  double value_;
};


acquirer::Capture Capture(acquirer::CaptureStatus status = acquirer::CaptureStatus::kCaptured) {
  acquirer::Capture c;
  c.id = "cap_1";
  c.status = status;
  c.amount = 25000;
  c.currency = "BRL";
  c.reference = "ch_1";
  return c;
}

LookupFacts Facts(OutcomeKind kind) {
  LookupFacts f;
  f.kind = kind;
  if (kind == OutcomeKind::kCaptured || kind == OutcomeKind::kMismatch) f.capture = Capture();
  return f;
}

class ReconcilerDecisionTest : public ::testing::Test {
 protected:
  Decision Decide(const LookupFacts& facts) { return DecideAfterLookup(facts, options_, random_); }
  DecisionOptions options_;
  FixedRandom random_{0.5};
};

TEST_F(ReconcilerDecisionTest, MatchingCaptureIsCapturedWithItsRemoteId) {
  const auto d = Decide(Facts(OutcomeKind::kCaptured));
  ASSERT_EQ(d.step, Step::kResolve);
  EXPECT_EQ(d.transition.to, ChargeStatus::kCaptured);
  EXPECT_EQ(d.transition.acquirer_capture_id, "cap_1");
  EXPECT_FALSE(d.transition.failure_reason.has_value());
  EXPECT_FALSE(d.error);
}

TEST_F(ReconcilerDecisionTest, MismatchIsNeedsReviewNeverAFixEvenBeforeTheDeadline) {
  const auto d = Decide(Facts(OutcomeKind::kMismatch));
  ASSERT_EQ(d.step, Step::kResolve);
  EXPECT_EQ(d.transition.to, ChargeStatus::kNeedsReview);
  EXPECT_EQ(d.transition.failure_reason, std::string(charges::reason::kCaptureMismatch));
  EXPECT_EQ(d.transition.acquirer_capture_id, "cap_1");
}

TEST_F(ReconcilerDecisionTest, MatchingCapturePastTheDeadlineIsVoided) {
  auto facts = Facts(OutcomeKind::kCaptured);
  facts.past_deadline = true;
  const auto d = Decide(facts);
  ASSERT_EQ(d.step, Step::kVoid);
  EXPECT_EQ(d.capture_id, "cap_1");
}

TEST_F(ReconcilerDecisionTest, VoidedCaptureIsCanceledPastTheDeadlineAndNeedsReviewBefore) {
  auto facts = Facts(OutcomeKind::kCaptured);
  facts.capture = Capture(acquirer::CaptureStatus::kVoided);
  facts.past_deadline = true;
  auto d = Decide(facts);
  ASSERT_EQ(d.step, Step::kResolve);
  EXPECT_EQ(d.transition.to, ChargeStatus::kCanceled);
  EXPECT_EQ(d.transition.failure_reason, std::string(charges::reason::kDeadlineVoided));
  facts.past_deadline = false;
  d = Decide(facts);
  EXPECT_EQ(d.transition.to, ChargeStatus::kNeedsReview);
  EXPECT_EQ(d.transition.failure_reason, std::string(charges::reason::kCaptureVoided));
}

TEST_F(ReconcilerDecisionTest, FirstNotFoundNeverFailsAndLooksAgainWhenTheWindowHasPassed) {
  auto facts = Facts(OutcomeKind::kNotFound);
  facts.not_found_looks = 1;
  facts.not_found_for = 0ms;
  const auto d = Decide(facts);
  ASSERT_EQ(d.step, Step::kDefer);
  EXPECT_EQ(d.defer, options_.visibility_window);  // longer than the first backoff (22.5 s here)
  EXPECT_FALSE(d.error);
}

TEST_F(ReconcilerDecisionTest, ManyLooksWithinTheWindowStillNeverFail) {
  auto facts = Facts(OutcomeKind::kNotFound);
  facts.not_found_looks = 10;
  facts.not_found_for = 4min;
  facts.check_count = 0;
  const auto d = Decide(facts);
  ASSERT_EQ(d.step, Step::kDefer);
  EXPECT_EQ(d.defer, 1min);  // the rest of the window
}

TEST_F(ReconcilerDecisionTest, OneLookPastTheWindowIsNotEnough) {
  auto facts = Facts(OutcomeKind::kNotFound);
  facts.not_found_looks = 1;
  facts.not_found_for = 10min;
  EXPECT_EQ(Decide(facts).step, Step::kDefer);
}

// Defect 11: "not found" is not the acquirer's answer, so by default the reconciler asks for one (a capture
// with the same key) rather than concluding `failed` from absence.
TEST_F(ReconcilerDecisionTest, RepeatedNotFoundPastTheWindowResubmitsByDefaultButNeverPastTheDeadline) {
  EXPECT_EQ(DecisionOptions{}.not_found_policy, NotFoundPolicy::kResubmit);
  auto facts = Facts(OutcomeKind::kNotFound);
  facts.not_found_looks = 3;
  facts.not_found_for = 6min;
  facts.capture_answered = true;
  EXPECT_EQ(Decide(facts).step, Step::kResubmit);
  facts.past_deadline = true;
  const auto d = Decide(facts);
  ASSERT_EQ(d.step, Step::kResolve);
  EXPECT_EQ(d.transition.to, ChargeStatus::kNeedsReview);
  EXPECT_EQ(d.transition.failure_reason, std::string(charges::reason::kDeadlineUnconfirmed));
  EXPECT_EQ(d.transition.basis, charges::Basis::kInference);
}

// Issue 41, defect 2: a charge none of whose capture attempts' answers is on record (its charge-api died
// mid-call, or never learned whether its intent committed) had a client that got no answer or a 503, never
// a 202: it is not captured behind its back by a resubmit, and a person decides.
TEST_F(ReconcilerDecisionTest, RepeatedNotFoundOfAChargeWithNoAnsweredCaptureGoesToAHumanNotToAResubmit) {
  auto facts = Facts(OutcomeKind::kNotFound);
  facts.not_found_looks = 2;
  facts.not_found_for = 6min;
  facts.capture_answered = false;
  const auto d = Decide(facts);
  ASSERT_EQ(d.step, Step::kResolve);
  EXPECT_EQ(d.transition.to, ChargeStatus::kNeedsReview);
  EXPECT_EQ(d.transition.failure_reason, std::string(charges::reason::kNotFoundAtAcquirer));
}

TEST_F(ReconcilerDecisionTest, RepeatedNotFoundUnderTheReviewPolicyGoesToAHuman) {
  options_.not_found_policy = NotFoundPolicy::kReview;
  auto facts = Facts(OutcomeKind::kNotFound);
  facts.not_found_looks = 2;
  facts.not_found_for = 5min;
  for (const bool past : {false, true}) {
    facts.past_deadline = past;
    const auto d = Decide(facts);
    ASSERT_EQ(d.step, Step::kResolve);
    EXPECT_EQ(d.transition.to, ChargeStatus::kNeedsReview);
    EXPECT_EQ(d.transition.failure_reason, std::string(charges::reason::kNotFoundAtAcquirer));
    EXPECT_EQ(d.transition.basis, charges::Basis::kInference);
  }
}

TEST_F(ReconcilerDecisionTest, RepeatedNotFoundUnderTheOptInFailPolicyFailsAsNotCapturedOnlyWhileItHoldsTheCharge) {
  options_.not_found_policy = NotFoundPolicy::kFail;
  auto facts = Facts(OutcomeKind::kNotFound);
  facts.not_found_looks = 2;
  facts.not_found_for = 5min;
  for (const bool past : {false, true}) {
    facts.past_deadline = past;
    const auto d = Decide(facts);
    ASSERT_EQ(d.step, Step::kResolve);
    EXPECT_EQ(d.transition.to, ChargeStatus::kFailed);
    EXPECT_EQ(d.transition.failure_reason, std::string(charges::reason::kNotCaptured));
    EXPECT_FALSE(d.transition.decline_code.has_value());
    // An inference from absence: it lands only while the run still holds the charge's lease.
    EXPECT_EQ(d.transition.basis, charges::Basis::kInference);
  }
}

TEST_F(ReconcilerDecisionTest, InconclusiveNotFoundPastTheDeadlineNeedsReview) {
  auto facts = Facts(OutcomeKind::kNotFound);
  facts.not_found_looks = 1;
  facts.not_found_for = 0ms;
  facts.past_deadline = true;
  const auto d = Decide(facts);
  ASSERT_EQ(d.step, Step::kResolve);
  EXPECT_EQ(d.transition.to, ChargeStatus::kNeedsReview);
  EXPECT_EQ(d.transition.failure_reason, std::string(charges::reason::kDeadlineUnconfirmed));
}

TEST_F(ReconcilerDecisionTest, EveryUnansweredLookupStaysPendingWithBackoffAndCountsAsAnError) {
  for (const auto kind : {OutcomeKind::kNotSent, OutcomeKind::kTimedOut, OutcomeKind::kConnectionDropped,
                          OutcomeKind::kServerError, OutcomeKind::kUnavailable, OutcomeKind::kThrottled,
                          OutcomeKind::kInFlight, OutcomeKind::kUntrustedResponse, OutcomeKind::kContractError,
                          OutcomeKind::kVoided, OutcomeKind::kPage}) {
    auto facts = Facts(kind);
    facts.check_count = 2;
    const auto d = Decide(facts);
    ASSERT_EQ(d.step, Step::kDefer) << acquirer::ToString(kind);
    EXPECT_TRUE(d.error) << acquirer::ToString(kind);
    EXPECT_EQ(d.defer, 90s) << acquirer::ToString(kind);  // ceiling 30 s * 4 = 120 s; half plus 0.5 * half
    facts.past_deadline = true;
    const auto late = Decide(facts);
    ASSERT_EQ(late.step, Step::kResolve) << acquirer::ToString(kind);
    EXPECT_EQ(late.transition.to, ChargeStatus::kNeedsReview);
    EXPECT_EQ(late.transition.failure_reason, std::string(charges::reason::kDeadlineUnconfirmed));
  }
}

TEST_F(ReconcilerDecisionTest, NoLookIsPutOffBeyondTheDeadline) {
  auto unknown = Facts(OutcomeKind::kTimedOut);
  unknown.check_count = 2;  // 90 s of backoff
  unknown.until_deadline = 10s;
  EXPECT_EQ(Decide(unknown).defer, 11s);  // just past it, where the deadline rules apply
  auto not_found = Facts(OutcomeKind::kNotFound);
  not_found.not_found_looks = 1;
  not_found.not_found_for = 0ms;
  not_found.until_deadline = 60s;  // the 5 min window would end after it
  EXPECT_EQ(Decide(not_found).defer, 61s);
  not_found.until_deadline = 10min;
  EXPECT_EQ(Decide(not_found).defer, 5min);
  ResubmitFacts resubmit;
  resubmit.kind = OutcomeKind::kTimedOut;
  resubmit.until_deadline = 3s;
  EXPECT_EQ(DecideAfterResubmit(resubmit, options_, random_).defer, 4s);
}

TEST_F(ReconcilerDecisionTest, ACaptureKindWithoutItsCaptureIsNotTakenAtItsWord) {
  auto facts = Facts(OutcomeKind::kCaptured);
  facts.capture.reset();
  EXPECT_EQ(Decide(facts).step, Step::kDefer);
}

TEST_F(ReconcilerDecisionTest, BackoffIsExponentialCappedWithEqualJitter) {
  FixedRandom low(0.0), high(0.999999);
  EXPECT_EQ(NextCheckDelay(0, options_, low), 15s);
  EXPECT_EQ(NextCheckDelay(0, options_, high), 29999ms);
  EXPECT_EQ(NextCheckDelay(1, options_, low), 30s);
  EXPECT_EQ(NextCheckDelay(3, options_, low), 120s);
  EXPECT_EQ(NextCheckDelay(5, options_, low), 450s);  // 960 s capped at 900 s
  EXPECT_EQ(NextCheckDelay(10'000, options_, low), 450s);
  EXPECT_EQ(NextCheckDelay(-1, options_, low), 15s);
}

TEST_F(ReconcilerDecisionTest, ResubmitOutcomes) {
  ResubmitFacts f;
  f.kind = OutcomeKind::kCaptured;
  f.capture = Capture();
  auto d = DecideAfterResubmit(f, options_, random_);
  EXPECT_EQ(d.transition.to, ChargeStatus::kCaptured);
  EXPECT_EQ(d.transition.acquirer_capture_id, "cap_1");

  f = {};
  f.kind = OutcomeKind::kDeclined;
  f.decline_code = "card_declined";
  d = DecideAfterResubmit(f, options_, random_);
  EXPECT_EQ(d.transition.to, ChargeStatus::kFailed);
  EXPECT_EQ(d.transition.decline_code, "card_declined");

  f.kind = OutcomeKind::kMismatch;
  EXPECT_EQ(DecideAfterResubmit(f, options_, random_).transition.to, ChargeStatus::kNeedsReview);
  f.kind = OutcomeKind::kContractError;
  d = DecideAfterResubmit(f, options_, random_);
  EXPECT_EQ(d.transition.to, ChargeStatus::kNeedsReview);
  EXPECT_EQ(d.transition.failure_reason, std::string(charges::reason::kRejected));

  f.kind = OutcomeKind::kTimedOut;
  d = DecideAfterResubmit(f, options_, random_);
  EXPECT_EQ(d.step, Step::kDefer);
  EXPECT_TRUE(d.error);
}

TEST_F(ReconcilerDecisionTest, AVoidConfirmedIsCanceledAVoidRefusedNeedsAPersonAVoidUnansweredIsTriedAgain) {
  auto d = DecideAfterVoid({OutcomeKind::kVoided, "cap_9", 0, 0}, options_, random_);
  EXPECT_EQ(d.step, Step::kResolve);
  EXPECT_EQ(d.transition.to, ChargeStatus::kCanceled);
  EXPECT_EQ(d.transition.acquirer_capture_id, "cap_9");
  for (const auto kind : {OutcomeKind::kContractError, OutcomeKind::kMismatch}) {
    d = DecideAfterVoid({kind, "cap_9", 0, 0}, options_, random_);
    EXPECT_EQ(d.step, Step::kResolve);
    EXPECT_EQ(d.transition.to, ChargeStatus::kNeedsReview);
    EXPECT_EQ(d.transition.failure_reason, std::string(charges::reason::kVoidUnconfirmed));
    EXPECT_EQ(d.transition.acquirer_capture_id, "cap_9");
  }
  // Issue 42: a void that got no answer is idempotent to ask again, and while it is on record no capture
  // lands; the charge stays pending (visible as overdue), never in a person's queue for the acquirer's weather.
  for (const auto kind : {OutcomeKind::kTimedOut, OutcomeKind::kUnavailable, OutcomeKind::kThrottled,
                          OutcomeKind::kServerError, OutcomeKind::kNotSent, OutcomeKind::kConnectionDropped,
                          OutcomeKind::kInFlight}) {
    d = DecideAfterVoid({kind, "cap_9", 3, 0}, options_, random_);
    EXPECT_EQ(d.step, Step::kDefer) << acquirer::ToString(kind);
    EXPECT_TRUE(d.error) << "the run says the acquirer did not answer";
    EXPECT_GE(d.defer, NextCheckDelay(3, options_, random_) / 2);
  }
}

// Stripe stores a refund's 500 under its key, refund made or not, and replays it forever. The charge stays
// pending so that the next look reads the capture and, if it still stands, refunds it under a fresh key;
// after kStoredVoidErrorsForReview of them a person looks.
TEST_F(ReconcilerDecisionTest, AVoidsStoredErrorIsVoidedAgainLaterUntilThirdThenAPersonLooks) {
  for (int stored = 1; stored < kStoredVoidErrorsForReview; ++stored) {
    const auto d = DecideAfterVoid({OutcomeKind::kStoredError, "cap_9", 2, stored}, options_, random_);
    EXPECT_EQ(d.step, Step::kDefer) << stored;
    EXPECT_TRUE(d.error);
    EXPECT_EQ(d.why, "void_stored_error");
    EXPECT_GE(d.defer, NextCheckDelay(2, options_, random_) / 2);
  }
  const auto d =
      DecideAfterVoid({OutcomeKind::kStoredError, "cap_9", 2, kStoredVoidErrorsForReview}, options_, random_);
  EXPECT_EQ(d.step, Step::kResolve);
  EXPECT_EQ(d.transition.to, ChargeStatus::kNeedsReview);
  EXPECT_EQ(d.transition.failure_reason, std::string(charges::reason::kVoidUnconfirmed));
  EXPECT_EQ(d.transition.acquirer_capture_id, "cap_9");
}

}  // namespace
}  // namespace charge_outbox::reconciler
