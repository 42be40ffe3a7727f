// The Retry-After of the answers that ask a client to come back (issue 43): a 409 from the in-flight
// request's expected finish, not its whole lease; a 202 from what its charge waits for.
#include "retry_after.hpp"

#include <gtest/gtest.h>

namespace charge_outbox::charge_api {
namespace {

using namespace std::chrono_literals;
using charges::ChargeStatus;

// The defaults: a 30 s lease, a run of at most 10 s timeout + 15 s budget, 8 s between our own retries.
const RetryAfterTimes kTimes{.lease = 30s, .longest_run = 25s, .retry_pause = 8s};

TEST(InFlightRetryAfter, IsTheRunsExpectedFinishNotTheWholeLease) {
  // The owner's call started just now (its lease is whole): done within 25 s, not 30.
  EXPECT_EQ(InFlightRetryAfter(30s, kTimes), 25s);
  // Started 12 s ago: 13 s left of its run.
  EXPECT_EQ(InFlightRetryAfter(18s, kTimes), 13s);
  // Rounded up, never early.
  EXPECT_EQ(InFlightRetryAfter(29'500ms, kTimes), 25s);
}

TEST(InFlightRetryAfter, AnOverdueOwnerWaitsForItsLeaseAndNeverLessThanASecond) {
  // Its run should be over: the lease's end is when a retry takes the charge over.
  EXPECT_EQ(InFlightRetryAfter(4s, kTimes), 4s);
  EXPECT_EQ(InFlightRetryAfter(300ms, kTimes), 1s);
  EXPECT_EQ(InFlightRetryAfter(0ms, kTimes), 1s);
}

TEST(InFlightRetryAfter, NeverPastTheLeasesEnd) {
  // An owner with a longer lease than ours (a rollout changing charge.lease), or a run longer than the
  // lease (no budget): at most what is left of its lease.
  EXPECT_EQ(InFlightRetryAfter(50s, kTimes), 25s);
  RetryAfterTimes unbounded = kTimes;
  unbounded.longest_run = std::chrono::milliseconds::max();
  EXPECT_EQ(InFlightRetryAfter(20s, unbounded), 20s);
}

charges::Charge ChargeIn(ChargeStatus status, std::chrono::milliseconds lease_remaining = 0ms) {
  charges::Charge c;
  c.status = status;
  c.lease_remaining = lease_remaining;
  return c;
}

TEST(PendingRetryAfter, SaysWhatThePendingChargeWaitsFor) {
  const auto pending = ChargeIn(ChargeStatus::kPending, 30s);  // as Begin read it: this request's own lease
  EXPECT_EQ(PendingRetryAfter(pending, PendingWait::kRetry, kTimes), 8s);
  EXPECT_EQ(PendingRetryAfter(pending, PendingWait::kReconciler, kTimes), 60s);
  EXPECT_EQ(PendingRetryAfter(pending, PendingWait::kOurLease, kTimes), 30s);
  // Read afresh: held by another request (until its run should be done), or free.
  EXPECT_EQ(PendingRetryAfter(ChargeIn(ChargeStatus::kPending, 20s), PendingWait::kAsRead, kTimes), 15s);
  EXPECT_EQ(PendingRetryAfter(ChargeIn(ChargeStatus::kPending), PendingWait::kAsRead, kTimes), 8s);
}

TEST(PendingRetryAfter, AChargeUnderReviewWaitsForAPersonWhateverElseIsKnown) {
  for (const auto wait : {PendingWait::kRetry, PendingWait::kReconciler, PendingWait::kOurLease, PendingWait::kAsRead}) {
    EXPECT_EQ(PendingRetryAfter(ChargeIn(ChargeStatus::kNeedsReview), wait, kTimes), 3600s);
  }
}

}  // namespace
}  // namespace charge_outbox::charge_api
