// PendingSweep's decisions applied, fast: one sweep against the in-memory stores (the SQL's rules: leases,
// the conditional transition and its owner guard, the attempt history), a scripted acquirer and a clock
// that sleeps by advancing itself. Races with another actor are staged with the store's Before hook;
// reconciler_e2etest.cpp and money_safety_e2etest.cpp run the same families against the real binaries.
#include "pending_sweep.hpp"

#include <gtest/gtest.h>

#include "acquirer_fakes.hpp"
#include "await.hpp"
#include "fake_charge_stores.hpp"
#include "log_capture.hpp"

namespace charge_outbox::reconciler {
namespace {

using namespace std::chrono_literals;
using acquirer::OutcomeKind;
using acquirer::testing::FakeClock;
using acquirer::testing::OutcomeOf;
using acquirer::testing::ScriptedAcquirerClient;
using acquirer::testing::ScriptedRandom;
using charges::ChargeStatus;
using testing::Await;
using testing::FakeChargeStore;
using testing::FakeChargeTable;
using testing::FakeReconciliationStore;
using Step = ScriptedAcquirerClient::Step;

Step Answer(OutcomeKind kind, acquirer::CaptureStatus status = acquirer::CaptureStatus::kCaptured) {
  auto outcome = OutcomeOf(kind);
  if (kind == OutcomeKind::kCaptured) {
    outcome.capture = acquirer::Capture{.id = "cap_1", .status = status, .amount = 25000, .currency = "BRL"};
  }
  if (kind == OutcomeKind::kDeclined) outcome.decline_code = "card_declined";
  return Step{outcome, 50ms};
}

class PendingSweepTest : public ::testing::Test {
 protected:
  PendingSweepTest() {
    options_.grace_period = 1min;
    options_.concurrency = 1;
    options_.claim_lease = 10s;
    options_.decision.visibility_window = 1min;
  }

  RunSummary Sweep(std::deque<Step> script) {
    acquirer_ = std::make_unique<ScriptedAcquirerClient>(std::move(script), &clock_);
    PendingSweep sweep({charges_, store_, *acquirer_, policy_, clock_, jitter_}, options_, kOwner);
    return Await(sweep.Run());
  }

  const charges::Charge& Charge() { return table_.charge(id_); }
  std::vector<std::string> Events() { return table_.EventTypes(id_); }

  // Attempt 1 finished as charge-api records it before answering 202: it left, and no answer came.
  void CaptureAnsweredUnknown() {
    auto& first = table_.row(id_).attempts.at(0);
    first.finished_at = first.started_at + 1s;
    first.outcome = OutcomeKind::kTimedOut;
    first.evidence = acquirer::EvidenceClass::kUnknown;
  }

  // A not-found look made `ago`, on record as the reconciler makes them.
  void LookedAndFoundNothing(std::chrono::milliseconds ago) {
    auto& row = table_.row(id_);
    const int no = ++row.charge.attempt_count;
    row.attempts.push_back(testing::FakeAttempt{no, "look-" + std::to_string(no), acquirer::Operation::kLookup,
                                                "reconciler", clock_.WallNow() - ago, clock_.WallNow() - ago,
                                                OutcomeKind::kNotFound, acquirer::EvidenceClass::kUnknown});
  }

  static constexpr const char* kOwner = "reconciler/test/run";
  FakeClock clock_;
  FakeChargeTable table_{[this] { return clock_.WallNow(); }};
  FakeChargeStore charges_{table_};
  FakeReconciliationStore store_{table_};
  acquirer::RetryPolicy policy_{acquirer::RetryPolicyOptions{2, {100ms, 200ms, retry::Jitter::kFull, 1s}},
                                std::make_shared<ScriptedRandom>(std::vector<double>{0.5})};
  ScriptedRandom jitter_{{0.5}};
  SweepOptions options_;
  std::unique_ptr<ScriptedAcquirerClient> acquirer_;
  std::string id_ = table_.InsertPending("k1", 10min);
};

TEST_F(PendingSweepTest, ACaptureFoundByKeyIsRecordedOnceWithItsEvent) {
  const auto summary = Sweep({Answer(OutcomeKind::kCaptured)});
  EXPECT_EQ(summary.captured, 1);
  EXPECT_EQ(Charge().status, ChargeStatus::kCaptured);
  EXPECT_EQ(Events(), (std::vector<std::string>{"payments.charge.initiated.v1", "payments.charge.captured.v1"}));
}

// Defect 11: by default, repeated not-found looks ask the acquirer for an answer with the same key.
TEST_F(PendingSweepTest, RepeatedNotFoundResubmitsWithTheSameKeyByDefaultAndTakesItsAnswer) {
  CaptureAnsweredUnknown();
  LookedAndFoundNothing(2min);
  const auto summary = Sweep({Answer(OutcomeKind::kNotFound), Answer(OutcomeKind::kDeclined)});
  ASSERT_EQ(acquirer_->captures.size(), 1u);
  EXPECT_EQ(acquirer_->captures[0].idempotency_key, charges::AcquirerIdempotencyKey(Charge()));
  EXPECT_EQ(summary.failed, 1);
  EXPECT_EQ(Charge().status, ChargeStatus::kFailed);
  EXPECT_EQ(Charge().decline_code, "card_declined");
}

TEST_F(PendingSweepTest, AResubmitWithoutAnAnswerStaysPending) {
  CaptureAnsweredUnknown();
  LookedAndFoundNothing(2min);
  const auto summary = Sweep({Answer(OutcomeKind::kNotFound), Answer(OutcomeKind::kNotSent),
                              Answer(OutcomeKind::kNotSent)});
  EXPECT_EQ(summary.still_pending, 1);
  EXPECT_EQ(Charge().status, ChargeStatus::kPending);
}

// Defect 5: under the opt-in `fail` policy, the inference lands only while the run holds the charge.
TEST_F(PendingSweepTest, AnInferredFailureDoesNotLandOnceChargeApiHasTakenTheChargeOver) {
  options_.decision.not_found_policy = NotFoundPolicy::kFail;
  LookedAndFoundNothing(2min);
  table_.Before("Complete", [&] {
    auto& row = table_.row(id_);
    row.charge.owner_id = "charge-api/request";
    row.lease_expires_at = clock_.WallNow() + 30s;
  });
  const auto summary = Sweep({Answer(OutcomeKind::kNotFound)});
  EXPECT_EQ(summary.failed, 0);
  EXPECT_EQ(summary.already_resolved, 1);
  EXPECT_EQ(Charge().status, ChargeStatus::kPending);
  EXPECT_EQ(Events(), std::vector<std::string>{"payments.charge.initiated.v1"});
}

TEST_F(PendingSweepTest, AnInferredFailureLandsWhileTheRunHoldsTheCharge) {
  options_.decision.not_found_policy = NotFoundPolicy::kFail;
  LookedAndFoundNothing(2min);
  const auto summary = Sweep({Answer(OutcomeKind::kNotFound)});
  EXPECT_EQ(summary.failed, 1);
  EXPECT_EQ(Charge().failure_reason, "not_captured");
}

// Defect 3, the reconciler's side: its proof of a capture loses to a failure someone wrote first.
TEST_F(PendingSweepTest, AProvenCaptureThatLosesToAFailureGoesToReview) {
  table_.Before("Complete", [&] {
    auto& row = table_.row(id_);
    row.charge.status = ChargeStatus::kFailed;
    row.charge.failure_reason = "acquirer_unreachable";
    table_.AddEvent(row);
  });
  const auto summary = Sweep({Answer(OutcomeKind::kCaptured)});
  EXPECT_EQ(summary.needs_review, 1);
  EXPECT_EQ(Charge().status, ChargeStatus::kNeedsReview);
  EXPECT_EQ(Charge().failure_reason, "acquirer_capture_contradicts_failed");
  EXPECT_EQ(Events().back(), "payments.charge.needs_review.v1");
}

// Defect 2 from the reconciler's side: the same reading as charge-api's.
TEST_F(PendingSweepTest, AVoidedCaptureBeforeTheDeadlineGoesToReview) {
  const auto summary = Sweep({Answer(OutcomeKind::kCaptured, acquirer::CaptureStatus::kVoided)});
  EXPECT_EQ(summary.needs_review, 1);
  EXPECT_EQ(Charge().failure_reason, "acquirer_capture_voided");
}

// Defect 4: a lookup that cannot be recorded is not sent.
TEST_F(PendingSweepTest, ALookupThatCannotBeRecordedIsNotSent) {
  for (int i = 0; i < 2; ++i) table_.FailNext("StartAttempt", db::DbErrc::kFailed);
  const auto summary = Sweep({});
  EXPECT_TRUE(acquirer_->lookups.empty());
  EXPECT_EQ(summary.errors, 1);
  EXPECT_EQ(Charge().status, ChargeStatus::kPending);
}

TEST_F(PendingSweepTest, PastTheDeadlineAnUnconfirmedChargeGoesToReviewWhateverThePolicy) {
  table_.row(id_).charge.created_at = clock_.WallNow() - 2h;
  const auto summary = Sweep({Answer(OutcomeKind::kNotFound)});
  EXPECT_EQ(summary.needs_review, 1);
  EXPECT_EQ(Charge().failure_reason, "deadline_passed_unconfirmed");
  EXPECT_TRUE(acquirer_->captures.empty());
}

// Issue 41, defect 2: a charge none of whose capture attempts ever left (its only one is on record as
// not sent: a 503 acquirer-busy, an intent whose commit was never confirmed) fails without a lookup, and
// is never resubmitted. Before the fix two not-found looks made the default policy capture it, behind the
// back of a client that was told only to retry and may have paid under a new key since.
TEST_F(PendingSweepTest, AChargeNoCaptureOfWhichEverLeftFailsAndIsNeverResubmitted) {
  auto& first = table_.row(id_).attempts.at(0);
  first.finished_at = first.started_at;
  first.outcome = OutcomeKind::kNotSent;
  first.evidence = acquirer::EvidenceClass::kNotSent;
  LookedAndFoundNothing(2min);
  const auto summary = Sweep({Answer(OutcomeKind::kNotFound), Answer(OutcomeKind::kCaptured)});
  EXPECT_TRUE(acquirer_->captures.empty());
  EXPECT_TRUE(acquirer_->lookups.empty());
  EXPECT_EQ(summary.failed, 1);
  EXPECT_EQ(Charge().status, ChargeStatus::kFailed);
  EXPECT_EQ(Charge().failure_reason, "acquirer_unreachable");
}

// ... one whose capture attempt left and was answered "unknown" on record (its client could have been
// told 202) is resubmitted ...
TEST_F(PendingSweepTest, AChargeWhoseCaptureWasAnsweredUnknownIsResubmitted) {
  CaptureAnsweredUnknown();
  LookedAndFoundNothing(2min);
  const auto summary = Sweep({Answer(OutcomeKind::kNotFound), Answer(OutcomeKind::kCaptured)});
  EXPECT_EQ(acquirer_->captures.size(), 1u);
  EXPECT_EQ(summary.captured, 1);
}

// ... and one whose only capture attempt that may have left is unfinished (its charge-api died mid-call,
// or never learned that its intent committed and answered 503) goes to a person: its client got no
// answer or a 503, never a 202.
TEST_F(PendingSweepTest, AChargeWhoseOnlyCaptureAttemptIsUnfinishedGoesToReviewNotToAResubmit) {
  LookedAndFoundNothing(2min);
  const auto summary = Sweep({Answer(OutcomeKind::kNotFound)});
  EXPECT_TRUE(acquirer_->captures.empty());
  EXPECT_EQ(summary.needs_review, 1);
  EXPECT_EQ(Charge().status, ChargeStatus::kNeedsReview);
  EXPECT_EQ(Charge().failure_reason, "not_found_at_acquirer");
}

// Issue 41, defect 3: this run read "captured" before the deadline; another run, past it, set out to void
// that capture (its void attempt is on record) and died before writing `canceled`. This run's capture must
// not land over the void: the run voids it too (the same key: the same void) and cancels. Before the fix
// the capture landed, and the client was replayed 201 for money the acquirer had given back.
TEST_F(PendingSweepTest, AStaleCaptureDoesNotLandOverAVoidOnRecordAndTheRunVoidsIt) {
  table_.Before("Complete", [&] {
    auto& row = table_.row(id_);
    const int no = ++row.charge.attempt_count;
    row.attempts.push_back(testing::FakeAttempt{no, "void-of-another-run", acquirer::Operation::kVoid, "reconciler",
                                                clock_.WallNow(), std::nullopt, std::nullopt, std::nullopt});
  });
  const auto summary = Sweep({Answer(OutcomeKind::kCaptured), Answer(OutcomeKind::kVoided)});
  EXPECT_EQ(summary.captured, 0);
  ASSERT_EQ(acquirer_->voids.size(), 1u);
  EXPECT_EQ(acquirer_->voids[0].capture_id, "cap_1");
  EXPECT_EQ(acquirer_->voids[0].idempotency_key, charges::AcquirerIdempotencyKey(Charge()));
  EXPECT_EQ(Charge().status, ChargeStatus::kCanceled);
  EXPECT_EQ(Events(), (std::vector<std::string>{"payments.charge.initiated.v1", "payments.charge.canceled.v1"}));
}

// Issue 41, defect 4: a proof that contradicts what another actor recorded, and whose review flag cannot
// be written, is a run error (the run fails and a later one, or the window report, finds it), never
// "resolved by someone else". Before the fix it was counted already_resolved and the run exited 0.
TEST_F(PendingSweepTest, AContradictionWhoseFlagCannotBeWrittenIsARunError) {
  table_.Before("Complete", [&] {
    auto& row = table_.row(id_);
    row.charge.status = ChargeStatus::kFailed;
    row.charge.failure_reason = "acquirer_unreachable";
    table_.AddEvent(row);
  });
  table_.FailNext("FlagForReview", db::DbErrc::kFailed);
  const auto summary = Sweep({Answer(OutcomeKind::kCaptured)});
  EXPECT_EQ(summary.errors, 1);
  EXPECT_EQ(summary.already_resolved, 0);
  EXPECT_EQ(Charge().status, ChargeStatus::kFailed);
}

// Issue 41, defect 5: a resubmit whose claim was lost between two attempts (charge-api's retry took the
// charge over) sends no further capture. Before the fix its second attempt was recorded and sent.
TEST_F(PendingSweepTest, AResubmitThatLostItsClaimSendsNothingMore) {
  CaptureAnsweredUnknown();
  LookedAndFoundNothing(2min);
  // StartAttempt calls: the lookup, the resubmit's first attempt, then its second.
  table_.BeforeCall("StartAttempt", 3, [&] {
    auto& row = table_.row(id_);
    row.charge.owner_id = "charge-api/retry";
    row.lease_expires_at = clock_.WallNow() + 30s;
  });
  const auto summary = Sweep({Answer(OutcomeKind::kNotFound), Answer(OutcomeKind::kTimedOut),
                              Answer(OutcomeKind::kCaptured)});
  EXPECT_EQ(acquirer_->captures.size(), 1u);
  EXPECT_EQ(summary.already_resolved, 1);
  EXPECT_EQ(Charge().status, ChargeStatus::kPending);
  EXPECT_EQ(Charge().owner_id, "charge-api/retry");
}

// Issue 41, defect 6: a resubmit answered past the deadline is read as charge-api reads its own captures,
// a capture to void, and voided. Before the fix the reconciler kept it (`captured`) where charge-api, with
// the same answer, would have left it to be voided.
TEST_F(PendingSweepTest, AResubmitAnsweredPastTheDeadlineIsVoidedNotKept) {
  table_.row(id_).charge.created_at = clock_.WallNow() - (1h - 1s);
  CaptureAnsweredUnknown();
  LookedAndFoundNothing(2min);
  const auto summary = Sweep({Answer(OutcomeKind::kNotFound), Step{Answer(OutcomeKind::kCaptured).outcome, 2s},
                              Answer(OutcomeKind::kVoided)});
  EXPECT_EQ(acquirer_->captures.size(), 1u);
  ASSERT_EQ(acquirer_->voids.size(), 1u);
  EXPECT_EQ(summary.captured, 0);
  EXPECT_EQ(Charge().status, ChargeStatus::kCanceled);
  EXPECT_EQ(Charge().failure_reason, "deadline_passed_voided");
}

// Issue 14, defect 6: the run's lines about a charge carry the trace id of the charge's request (the trace
// its transitions join), whatever trace id the thread holds, from the sweep, the attempt recorder and Settle.
class PendingSweepTraceTest : public PendingSweepTest {
 protected:
  static constexpr const char* kTrace = "4bf92f3577b34da6a3ce929d0e0e4736";

  PendingSweepTraceTest() { table_.row(id_).charge.traceparent = std::string("00-") + kTrace + "-00f067aa0ba902b7-01"; }

  RunSummary SweepWhileTheThreadHoldsAnotherTraceId(std::deque<Step> script) {
    log::ScopedTraceId other("0123456789abcdef0123456789abcdef");
    return Sweep(std::move(script));
  }

  // There is a line containing `text`, and every line naming the charge or containing `text` carries
  // the charge's trace id.
  void ExpectLinesCarryTheChargesTraceId(const std::string& text) {
    EXPECT_FALSE(captured_.LinesWith(text).empty()) << "no line says: " << text;
    for (const auto& about : {text, Charge().public_id(), Charge().id}) {
      for (const auto& line : captured_.LinesWith(about)) {
        EXPECT_EQ(testing::LogCapture::TraceIdOf(line), kTrace) << boost::json::serialize(line);
      }
    }
  }

  testing::LogCapture captured_;
};

TEST_F(PendingSweepTraceTest, AContradictionIsLoggedUnderTheChargesTraceId) {
  table_.Before("Complete", [&] {
    auto& row = table_.row(id_);
    row.charge.status = ChargeStatus::kFailed;
    row.charge.failure_reason = "acquirer_unreachable";
    table_.AddEvent(row);
  });
  EXPECT_EQ(SweepWhileTheThreadHoldsAnotherTraceId({Answer(OutcomeKind::kCaptured)}).needs_review, 1);
  ExpectLinesCarryTheChargesTraceId("but the charge was already failed");
}

TEST_F(PendingSweepTraceTest, LooksNotRecordedAndTheDeferralAreLoggedUnderTheChargesTraceId) {
  table_.FailNext("StartAttempt", db::DbErrc::kFailed);
  table_.FailNext("StartAttempt", db::DbErrc::kFailed);
  EXPECT_EQ(SweepWhileTheThreadHoldsAnotherTraceId({}).still_pending, 1);
  ExpectLinesCarryTheChargesTraceId("not recorded, so not sent");
  ExpectLinesCarryTheChargesTraceId("stays pending");
}

}  // namespace
}  // namespace charge_outbox::reconciler
