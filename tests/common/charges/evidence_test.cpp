// The one reading of acquirer evidence (docs/charge-states.md), as a table: every kind of run, every
// outcome, before and past the deadline, with and without a run that never left the process, and with
// every attempt history that matters. Also the contradiction rule and the acquirer key.
#include "charge_outbox/charges/evidence.hpp"

#include <gtest/gtest.h>

#include <vector>

#include "charge_outbox/util/sha256.hpp"

namespace charge_outbox::charges {
namespace {

using acquirer::CaptureStatus;
using acquirer::OutcomeKind;

constexpr OutcomeKind kEveryOutcome[] = {
    OutcomeKind::kCaptured,    OutcomeKind::kDeclined,          OutcomeKind::kVoided,
    OutcomeKind::kPage,        OutcomeKind::kNotFound,          OutcomeKind::kNotSent,
    OutcomeKind::kTimedOut,    OutcomeKind::kConnectionDropped, OutcomeKind::kServerError,
    OutcomeKind::kUnavailable, OutcomeKind::kThrottled,         OutcomeKind::kInFlight,
    OutcomeKind::kUntrustedResponse, OutcomeKind::kMismatch,    OutcomeKind::kContractError,
};
constexpr RunKind kEveryRunKind[] = {RunKind::kFirstCapture, RunKind::kCapture, RunKind::kLookup, RunKind::kVoid};

// No usable answer: unknown whether the acquirer acted (or, for kNotSent, a run not all of whose
// attempts stayed in the process).
constexpr OutcomeKind kNoAnswer[] = {
    OutcomeKind::kTimedOut,    OutcomeKind::kConnectionDropped, OutcomeKind::kServerError,       OutcomeKind::kUnavailable,
    OutcomeKind::kThrottled,   OutcomeKind::kInFlight,          OutcomeKind::kUntrustedResponse, OutcomeKind::kNotSent,
};

acquirer::Capture CaptureOf(CaptureStatus status = CaptureStatus::kCaptured) {
  acquirer::Capture c;
  c.id = "cap_1";
  c.status = status;
  c.amount = 25000;
  c.currency = "BRL";
  c.reference = "ch_1";
  return c;
}

RunFacts RunOf(RunKind kind, OutcomeKind last, CaptureStatus status = CaptureStatus::kCaptured) {
  RunFacts run;
  run.kind = kind;
  run.last = last;
  if (last == OutcomeKind::kCaptured || last == OutcomeKind::kMismatch) run.capture = CaptureOf(status);
  if (last == OutcomeKind::kVoided) run.capture = CaptureOf(CaptureStatus::kVoided);
  if (last == OutcomeKind::kDeclined) run.decline_code = "card_declined";
  return run;
}

ChargeFacts Before() { return ChargeFacts{false, std::nullopt}; }
ChargeFacts Past() { return ChargeFacts{true, std::nullopt}; }
ChargeFacts CleanHistory() { return ChargeFacts{false, AttemptHistory{.capture_may_have_left = false}}; }
ChargeFacts HistoryWithACapture() { return ChargeFacts{false, AttemptHistory{.capture_may_have_left = true}}; }

TEST(ReadRun, EveryUnknownAnswerStaysPendingForEveryReaderAndNeverBecomesADecline) {
  for (const auto kind : {RunKind::kFirstCapture, RunKind::kCapture, RunKind::kLookup}) {
    for (const auto last : kNoAnswer) {
      for (const auto& charge : {Before(), Past(), CleanHistory()}) {
        // One unknown attempt in a run makes it unknown, even when its last attempt was never sent.
        const auto r = ReadRun(RunOf(kind, last), charge);
        EXPECT_EQ(r.finding, Finding::kUnanswered) << acquirer::ToString(last);
      }
    }
  }
}

TEST(ReadRun, AMatchingCaptureIsCapturedBeforeTheDeadlineAndVoidedPastIt) {
  for (const auto kind : {RunKind::kFirstCapture, RunKind::kCapture, RunKind::kLookup}) {
    const auto before = ReadRun(RunOf(kind, OutcomeKind::kCaptured), Before());
    ASSERT_EQ(before.finding, Finding::kSettled);
    EXPECT_EQ(before.transition.to, ChargeStatus::kCaptured);
    EXPECT_EQ(before.transition.basis, Basis::kAcquirerAnswer);
    EXPECT_EQ(before.transition.acquirer_capture_id, "cap_1");
    EXPECT_FALSE(before.transition.failure_reason.has_value());
    EXPECT_EQ(ReadRun(RunOf(kind, OutcomeKind::kCaptured), Past()).finding, Finding::kCaptureToVoid);
  }
}

// Defect 2: a voided capture is never recorded `captured`, by charge-api or the reconciler.
TEST(ReadRun, AVoidedCaptureIsReviewBeforeTheDeadlineAndCanceledPastIt) {
  for (const auto kind : {RunKind::kCapture, RunKind::kLookup}) {
    const auto before = ReadRun(RunOf(kind, OutcomeKind::kCaptured, CaptureStatus::kVoided), Before());
    ASSERT_EQ(before.finding, Finding::kSettled);
    EXPECT_EQ(before.transition.to, ChargeStatus::kNeedsReview);
    EXPECT_EQ(before.transition.failure_reason, std::string(reason::kCaptureVoided));
    EXPECT_EQ(before.transition.basis, Basis::kAcquirerAnswer);
    const auto past = ReadRun(RunOf(kind, OutcomeKind::kCaptured, CaptureStatus::kVoided), Past());
    ASSERT_EQ(past.finding, Finding::kSettled);
    EXPECT_EQ(past.transition.to, ChargeStatus::kCanceled);
    EXPECT_EQ(past.transition.failure_reason, std::string(reason::kDeadlineVoided));
    EXPECT_EQ(past.transition.acquirer_capture_id, "cap_1");
  }
}

TEST(ReadRun, ACaptureWithoutItsBodyIsNotTakenAtItsWord) {
  auto run = RunOf(RunKind::kLookup, OutcomeKind::kCaptured);
  run.capture.reset();
  EXPECT_EQ(ReadRun(run, Before()).finding, Finding::kUnanswered);
}

TEST(ReadRun, MismatchAndDeclineAreTheAcquirersAnswerWhateverTheDeadline) {
  for (const auto kind : {RunKind::kFirstCapture, RunKind::kCapture, RunKind::kLookup}) {
    for (const auto& charge : {Before(), Past()}) {
      const auto mismatch = ReadRun(RunOf(kind, OutcomeKind::kMismatch), charge);
      ASSERT_EQ(mismatch.finding, Finding::kSettled);
      EXPECT_EQ(mismatch.transition.to, ChargeStatus::kNeedsReview);
      EXPECT_EQ(mismatch.transition.failure_reason, std::string(reason::kCaptureMismatch));
      EXPECT_EQ(mismatch.transition.basis, Basis::kAcquirerAnswer);
      const auto declined = ReadRun(RunOf(kind, OutcomeKind::kDeclined), charge);
      ASSERT_EQ(declined.finding, Finding::kSettled);
      EXPECT_EQ(declined.transition.to, ChargeStatus::kFailed);
      EXPECT_EQ(declined.transition.decline_code, "card_declined");
      EXPECT_EQ(declined.transition.basis, Basis::kAcquirerAnswer);
    }
  }
}

TEST(ReadRun, ARefusedCaptureGoesToReviewAndARefusedLookupProvesNothing) {
  for (const auto kind : {RunKind::kFirstCapture, RunKind::kCapture}) {
    const auto r = ReadRun(RunOf(kind, OutcomeKind::kContractError), Before());
    ASSERT_EQ(r.finding, Finding::kSettled);
    EXPECT_EQ(r.transition.to, ChargeStatus::kNeedsReview);
    EXPECT_EQ(r.transition.failure_reason, std::string(reason::kRejected));
    EXPECT_EQ(r.transition.basis, Basis::kInference);
  }
  EXPECT_EQ(ReadRun(RunOf(RunKind::kLookup, OutcomeKind::kContractError), Before()).finding, Finding::kUnanswered);
}

TEST(ReadRun, NotFoundIsOnlyALookupsAndProvesNothingByItself) {
  EXPECT_EQ(ReadRun(RunOf(RunKind::kLookup, OutcomeKind::kNotFound), Before()).finding, Finding::kNotVisible);
  EXPECT_EQ(ReadRun(RunOf(RunKind::kLookup, OutcomeKind::kNotFound), Past()).finding, Finding::kNotVisible);
  EXPECT_EQ(ReadRun(RunOf(RunKind::kCapture, OutcomeKind::kNotFound), Before()).finding, Finding::kUnanswered);
}

// Defect 1: "nothing left the process" ends a charge only in the intent's own first capture run, and
// only when no capture attempt on record (any actor) may have reached the acquirer.
TEST(ReadRun, NeverSentFailsOnlyTheFirstCaptureWithACleanHistory) {
  auto never_sent = [](RunKind kind) {
    auto run = RunOf(kind, OutcomeKind::kNotSent);
    run.never_sent = true;
    return run;
  };
  const auto first = ReadRun(never_sent(RunKind::kFirstCapture), CleanHistory());
  ASSERT_EQ(first.finding, Finding::kSettled);
  EXPECT_EQ(first.transition.to, ChargeStatus::kFailed);
  EXPECT_EQ(first.transition.failure_reason, std::string(reason::kAcquirerUnreachable));
  EXPECT_EQ(first.transition.basis, Basis::kInference);

  // The history says an earlier capture may have left, or it could not be read: nothing is concluded.
  EXPECT_EQ(ReadRun(never_sent(RunKind::kFirstCapture), HistoryWithACapture()).finding, Finding::kUnanswered);
  EXPECT_EQ(ReadRun(never_sent(RunKind::kFirstCapture), Before()).finding, Finding::kUnanswered);
  // A takeover's lookup or capture never concludes it, whatever the history says.
  for (const auto kind : {RunKind::kCapture, RunKind::kLookup}) {
    EXPECT_EQ(ReadRun(never_sent(kind), CleanHistory()).finding, Finding::kUnanswered);
    EXPECT_EQ(ReadRun(never_sent(kind), HistoryWithACapture()).finding, Finding::kUnanswered);
  }
}

// Issue 14, defect 9: a run our own connection pool kept in the process proves nothing about the acquirer.
TEST(ReadRun, ARunOurOwnPoolNeverSentConcludesNothingEvenOnACleanHistory) {
  acquirer::RetryRun pool_busy;
  for (const auto transport : {acquirer::TransportStatus::kConnectRefused, acquirer::TransportStatus::kPoolTimedOut}) {
    acquirer::AttemptRecord attempt;
    attempt.outcome.kind = OutcomeKind::kNotSent;
    attempt.outcome.transport = transport;
    pool_busy.attempts.push_back(attempt);
  }
  const auto facts = FactsOf(RunKind::kFirstCapture, pool_busy);
  EXPECT_TRUE(facts.never_sent);
  EXPECT_TRUE(facts.queued_out);
  EXPECT_EQ(ReadRun(facts, CleanHistory()).finding, Finding::kUnanswered);

  // The same run without the pool's refusal is the acquirer's absence, and fails the charge.
  pool_busy.attempts.pop_back();
  const auto refused = FactsOf(RunKind::kFirstCapture, pool_busy);
  EXPECT_FALSE(refused.queued_out);
  EXPECT_EQ(ReadRun(refused, CleanHistory()).transition.to, ChargeStatus::kFailed);
}

TEST(ReadRun, AVoidIsConfirmedOnlyByTheAcquirersVoid) {
  for (const auto last : kEveryOutcome) {
    const auto r = ReadRun(RunOf(RunKind::kVoid, last), Past());
    ASSERT_EQ(r.finding, Finding::kSettled) << acquirer::ToString(last);
    if (last == OutcomeKind::kVoided) {
      EXPECT_EQ(r.transition.to, ChargeStatus::kCanceled);
      EXPECT_EQ(r.transition.failure_reason, std::string(reason::kDeadlineVoided));
      EXPECT_EQ(r.transition.basis, Basis::kAcquirerAnswer);
    } else {
      EXPECT_EQ(r.transition.to, ChargeStatus::kNeedsReview) << acquirer::ToString(last);
      EXPECT_EQ(r.transition.failure_reason, std::string(reason::kVoidUnconfirmed));
      EXPECT_EQ(r.transition.basis, Basis::kInference);
    }
  }
}

// The whole table: whatever the run and the facts, a reading never claims money moved or did not move
// without the acquirer's word, except the one inference above.
TEST(ReadRun, NoReadingClaimsAStateTheEvidenceDoesNotProve) {
  for (const auto kind : kEveryRunKind) {
    for (const auto last : kEveryOutcome) {
      for (const bool never_sent : {false, true}) {
        for (const auto& charge : {Before(), Past(), CleanHistory(), HistoryWithACapture()}) {
          auto run = RunOf(kind, last);
          run.never_sent = never_sent && last == OutcomeKind::kNotSent;
          const auto r = ReadRun(run, charge);
          if (r.finding != Finding::kSettled) continue;
          const auto& t = r.transition;
          switch (t.to) {
            case ChargeStatus::kCaptured:
              EXPECT_EQ(last, OutcomeKind::kCaptured);
              EXPECT_FALSE(charge.past_deadline);
              break;
            case ChargeStatus::kFailed:
              if (t.decline_code) {
                EXPECT_EQ(last, OutcomeKind::kDeclined);
              } else {
                EXPECT_TRUE(run.never_sent && kind == RunKind::kFirstCapture && charge.history &&
                            !charge.history->capture_may_have_left);
              }
              break;
            case ChargeStatus::kCanceled:  // a void runs past the deadline only
              EXPECT_TRUE(charge.past_deadline || kind == RunKind::kVoid);
              break;
            case ChargeStatus::kNeedsReview: EXPECT_TRUE(t.failure_reason.has_value()); break;
            case ChargeStatus::kPending: ADD_FAILURE() << "a transition to pending"; break;
          }
          if (t.basis == Basis::kAcquirerAnswer) {
            EXPECT_TRUE(last == OutcomeKind::kCaptured || last == OutcomeKind::kDeclined ||
                        last == OutcomeKind::kMismatch || last == OutcomeKind::kVoided);
          }
        }
      }
    }
  }
}

TEST(InferredTransitions, NeedTheirOwnerAndCarryTheirReason) {
  for (const auto& t : {UnconfirmedPastDeadline(), NotCapturedAfterRepeatedLooks(), NotFoundForReview()}) {
    EXPECT_EQ(t.basis, Basis::kInference);
    EXPECT_TRUE(t.failure_reason.has_value());
  }
  EXPECT_EQ(UnconfirmedPastDeadline().to, ChargeStatus::kNeedsReview);
  EXPECT_EQ(NotCapturedAfterRepeatedLooks().to, ChargeStatus::kFailed);
  EXPECT_EQ(NotCapturedAfterRepeatedLooks().failure_reason, std::string(reason::kNotCaptured));
  EXPECT_EQ(NotFoundForReview().to, ChargeStatus::kNeedsReview);
}

Charge Winner(ChargeStatus status, std::optional<std::string> capture_id = std::nullopt) {
  Charge c;
  c.status = status;
  c.acquirer_capture_id = std::move(capture_id);
  return c;
}

Transition Proven(ChargeStatus to, Basis basis = Basis::kAcquirerAnswer) {
  Transition t;
  t.to = to;
  t.basis = basis;
  if (to == ChargeStatus::kCaptured || to == ChargeStatus::kCanceled) t.acquirer_capture_id = "cap_1";
  return t;
}

// Defect 3: proof of money against a no-money state (and the reverse) goes to review.
TEST(Contradiction, ProofOfMoneyAgainstANoMoneyStateAndTheReverse) {
  EXPECT_EQ(Contradiction(Proven(ChargeStatus::kCaptured), Winner(ChargeStatus::kFailed)),
            "acquirer_capture_contradicts_failed");
  EXPECT_EQ(Contradiction(Proven(ChargeStatus::kCaptured), Winner(ChargeStatus::kCanceled)),
            "acquirer_capture_contradicts_canceled");
  EXPECT_EQ(Contradiction(Proven(ChargeStatus::kCaptured), Winner(ChargeStatus::kCanceled, "cap_2")),
            "acquirer_capture_contradicts_canceled");
  // The void that canceled it reversed this very capture: no contradiction.
  EXPECT_EQ(Contradiction(Proven(ChargeStatus::kCaptured), Winner(ChargeStatus::kCanceled, "cap_1")), std::nullopt);
  auto declined = Proven(ChargeStatus::kFailed);
  declined.decline_code = "card_declined";
  EXPECT_EQ(Contradiction(declined, Winner(ChargeStatus::kCaptured)), "acquirer_decline_contradicts_captured");
  EXPECT_EQ(Contradiction(Proven(ChargeStatus::kCanceled), Winner(ChargeStatus::kCaptured)),
            "acquirer_void_contradicts_captured");
}

TEST(Contradiction, AgreementsInferencesAndReviewsAreNone) {
  EXPECT_EQ(Contradiction(Proven(ChargeStatus::kCaptured), Winner(ChargeStatus::kCaptured)), std::nullopt);
  EXPECT_EQ(Contradiction(Proven(ChargeStatus::kCaptured), Winner(ChargeStatus::kNeedsReview)), std::nullopt);
  EXPECT_EQ(Contradiction(Proven(ChargeStatus::kCaptured), Winner(ChargeStatus::kPending)), std::nullopt);
  // A failure that is not a decline proves nothing against a capture.
  EXPECT_EQ(Contradiction(Proven(ChargeStatus::kFailed), Winner(ChargeStatus::kCaptured)), std::nullopt);
  EXPECT_EQ(Contradiction(Proven(ChargeStatus::kCaptured, Basis::kInference), Winner(ChargeStatus::kFailed)),
            std::nullopt);
  EXPECT_EQ(Contradiction(Proven(ChargeStatus::kNeedsReview), Winner(ChargeStatus::kFailed)), std::nullopt);
}

// Defect 7: the acquirer key always fits its 255 characters, and its two forms never meet.
TEST(AcquirerIdempotencyKey, ScopedByMerchantAndHashedWhenTooLong) {
  Charge c;
  c.merchant_id = "00000000-0000-4000-8000-000000000001";
  c.idempotency_key = std::string(218, 'k');
  EXPECT_EQ(AcquirerIdempotencyKey(c), c.merchant_id + ":" + c.idempotency_key);
  EXPECT_EQ(AcquirerIdempotencyKey(c).size(), kAcquirerKeyLimit);
  for (const std::size_t length : {219u, 240u, 255u}) {
    c.idempotency_key = std::string(length, 'k');
    const auto key = AcquirerIdempotencyKey(c);
    EXPECT_EQ(key, c.merchant_id + "#" + util::Sha256Hex(c.idempotency_key));
    EXPECT_LE(key.size(), kAcquirerKeyLimit);
    EXPECT_EQ(key[36], '#');
  }
  // A client key that looks like a hashed one is still sent as is: character 36 tells them apart.
  c.idempotency_key = util::Sha256Hex(std::string(240, 'k'));
  EXPECT_EQ(AcquirerIdempotencyKey(c)[36], ':');
}

}  // namespace
}  // namespace charge_outbox::charges
