// The rule of a person's decision, as a table: what the acquirer says now against what the person chose.
#include "resolution.hpp"

#include <gtest/gtest.h>

namespace charge_outbox::charge_admin {
namespace {

using charges::ChargeStatus;
using Kind = AcquirerView::Kind;
using Step = Verdict::Step;

acquirer::RetryRun Answered(acquirer::OutcomeKind kind, std::optional<acquirer::CaptureStatus> capture = std::nullopt,
                            std::optional<int> http_status = std::nullopt) {
  acquirer::RetryRun run;
  acquirer::AttemptRecord record;
  record.outcome.operation = acquirer::Operation::kLookup;
  record.outcome.kind = kind;
  record.outcome.http_status = http_status;
  if (capture) {
    record.outcome.capture = acquirer::Capture{"cap_1", *capture, 25000, "BRL", "ch_1", "2026-12-05T00:00:00Z", {}};
  }
  run.attempts.push_back(record);
  return run;
}

AcquirerView View(Kind kind) {
  AcquirerView v;
  v.kind = kind;
  if (kind == Kind::kLiveCapture || kind == Kind::kVoidedCapture || kind == Kind::kMismatch) {
    v.capture = acquirer::Capture{"cap_1", kind == Kind::kVoidedCapture ? acquirer::CaptureStatus::kVoided
                                                                        : acquirer::CaptureStatus::kCaptured,
                                  25000, "BRL", "ch_1", "", {}};
  }
  v.words = "what the acquirer said";
  return v;
}

TEST(ReadLookup, TellsALiveCaptureAVoidedOneNoneAForeignOneAndNoAnswerApart) {
  EXPECT_EQ(ReadLookup(Answered(acquirer::OutcomeKind::kCaptured, acquirer::CaptureStatus::kCaptured)).kind,
            Kind::kLiveCapture);
  EXPECT_EQ(ReadLookup(Answered(acquirer::OutcomeKind::kCaptured, acquirer::CaptureStatus::kVoided)).kind,
            Kind::kVoidedCapture);
  EXPECT_EQ(ReadLookup(Answered(acquirer::OutcomeKind::kNotFound, std::nullopt, 404)).kind, Kind::kNotFound);
  EXPECT_EQ(ReadLookup(Answered(acquirer::OutcomeKind::kMismatch, acquirer::CaptureStatus::kCaptured)).kind,
            Kind::kMismatch);
  for (const auto kind : {acquirer::OutcomeKind::kTimedOut, acquirer::OutcomeKind::kUnavailable,
                          acquirer::OutcomeKind::kThrottled, acquirer::OutcomeKind::kNotSent,
                          acquirer::OutcomeKind::kServerError, acquirer::OutcomeKind::kContractError}) {
    const auto view = ReadLookup(Answered(kind, std::nullopt, 503));
    EXPECT_EQ(view.kind, Kind::kUnanswered) << acquirer::ToString(kind);
    EXPECT_NE(view.words.find(acquirer::ToString(kind)), std::string::npos) << view.words;
  }
  const auto live = ReadLookup(Answered(acquirer::OutcomeKind::kCaptured, acquirer::CaptureStatus::kCaptured));
  EXPECT_EQ(live.words, "a live capture cap_1 of 25000 BRL for ch_1");
}

struct Row {
  ChargeStatus to;
  Kind said;
  Step without_override;
  Step with_override;
};

TEST(Decide, EveryChoiceAgainstEveryAnswer) {
  const Row table[] = {
      // captured needs a live capture.
      {ChargeStatus::kCaptured, Kind::kLiveCapture, Step::kResolve, Step::kResolve},
      {ChargeStatus::kCaptured, Kind::kVoidedCapture, Step::kRefuse, Step::kResolve},
      {ChargeStatus::kCaptured, Kind::kNotFound, Step::kRefuse, Step::kResolve},
      {ChargeStatus::kCaptured, Kind::kMismatch, Step::kRefuse, Step::kResolve},
      {ChargeStatus::kCaptured, Kind::kUnanswered, Step::kRefuse, Step::kResolve},
      // failed needs no live capture, and a voided one is canceled.
      {ChargeStatus::kFailed, Kind::kLiveCapture, Step::kRefuse, Step::kResolve},
      {ChargeStatus::kFailed, Kind::kVoidedCapture, Step::kRefuse, Step::kResolve},
      {ChargeStatus::kFailed, Kind::kNotFound, Step::kResolve, Step::kResolve},
      {ChargeStatus::kFailed, Kind::kMismatch, Step::kRefuse, Step::kResolve},
      {ChargeStatus::kFailed, Kind::kUnanswered, Step::kRefuse, Step::kResolve},
      // canceled needs a void: one done, or one this decision makes.
      {ChargeStatus::kCanceled, Kind::kLiveCapture, Step::kVoidThenResolve, Step::kVoidThenResolve},
      {ChargeStatus::kCanceled, Kind::kVoidedCapture, Step::kResolve, Step::kResolve},
      {ChargeStatus::kCanceled, Kind::kNotFound, Step::kRefuse, Step::kResolve},
      {ChargeStatus::kCanceled, Kind::kMismatch, Step::kRefuse, Step::kResolve},
      {ChargeStatus::kCanceled, Kind::kUnanswered, Step::kRefuse, Step::kResolve},
  };
  for (const auto& row : table) {
    const auto label = std::string(charges::ToString(row.to)) + " / " + std::to_string(static_cast<int>(row.said));
    const auto plain = Decide(row.to, View(row.said), false);
    EXPECT_EQ(plain.step, row.without_override) << label << ": " << plain.why;
    const auto overridden = Decide(row.to, View(row.said), true);
    EXPECT_EQ(overridden.step, row.with_override) << label << ": " << overridden.why;
    if (plain.step == Step::kRefuse) {
      EXPECT_NE(plain.why.find("what the acquirer said"), std::string::npos) << "a refusal quotes the acquirer";
      EXPECT_NE(plain.why.find("nothing changed"), std::string::npos) << plain.why;
    }
    if (row.to == ChargeStatus::kCaptured) {
      EXPECT_EQ(overridden.failure_reason, std::nullopt);
    } else {
      EXPECT_EQ(overridden.failure_reason, std::string(kOperatorDecision));
    }
  }
}

TEST(Decide, ACaptureOrCancelNamesTheAcquirersCapture) {
  EXPECT_EQ(Decide(ChargeStatus::kCaptured, View(Kind::kLiveCapture), false).capture_id, "cap_1");
  EXPECT_EQ(Decide(ChargeStatus::kCanceled, View(Kind::kLiveCapture), false).capture_id, "cap_1");
  EXPECT_EQ(Decide(ChargeStatus::kCanceled, View(Kind::kVoidedCapture), false).capture_id, "cap_1");
  EXPECT_EQ(Decide(ChargeStatus::kFailed, View(Kind::kNotFound), false).capture_id, std::nullopt);
}

TEST(Decide, OnlyTheThreeFinalStatesAreDecisions) {
  EXPECT_EQ(Decide(ChargeStatus::kPending, View(Kind::kNotFound), true).step, Step::kRefuse);
  EXPECT_EQ(Decide(ChargeStatus::kNeedsReview, View(Kind::kNotFound), true).step, Step::kRefuse);
}

TEST(VoidConfirmed, OnlyTheAcquirersVoidedConfirmsIt) {
  EXPECT_TRUE(VoidConfirmed(Answered(acquirer::OutcomeKind::kVoided)));
  EXPECT_FALSE(VoidConfirmed(Answered(acquirer::OutcomeKind::kTimedOut)));
  EXPECT_FALSE(VoidConfirmed(Answered(acquirer::OutcomeKind::kUnavailable)));
}

}  // namespace
}  // namespace charge_outbox::charge_admin
