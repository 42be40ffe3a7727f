// The retry policy's schedule (bounds, cap, jitter, budget, Retry-After, attempts) and RunWithRetries
// over a scripted client, all on a fake clock and a scripted random source: nothing sleeps.
#include "charge_outbox/acquirer/retry_policy.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <boost/asio/io_context.hpp>
#include <regex>
#include <set>

#include "charge_outbox/acquirer/acquirer_client.hpp"
#include "acquirer_fakes.hpp"
#include "printers.hpp"
#include "run_sync.hpp"

namespace charge_outbox::acquirer {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;
using testing::FakeClock;
using testing::OutcomeOf;
using testing::RunSync;
using testing::ScriptedAcquirerClient;
using testing::ScriptedRandom;
using Step = ScriptedAcquirerClient::Step;

RetryPolicyOptions Options(int max_attempts = 4, milliseconds base = milliseconds{1000},
                           milliseconds cap = milliseconds{8000}, milliseconds budget = milliseconds{15000}) {
  return RetryPolicyOptions{max_attempts, {base, cap, retry::Jitter::kFull, budget}};
}

RetryPolicy PolicyWith(std::vector<double> randoms, RetryPolicyOptions options = Options()) {
  return RetryPolicy(options, std::make_shared<ScriptedRandom>(std::move(randoms)));
}

// ---- the schedule ------------------------------------------------------------------------------

TEST(RetryPolicy, BackoffCeilingDoublesUpToTheCap) {
  const auto policy = PolicyWith({0.0});
  EXPECT_EQ(policy.BackoffCeiling(0), milliseconds{1000});
  EXPECT_EQ(policy.BackoffCeiling(1), milliseconds{2000});
  EXPECT_EQ(policy.BackoffCeiling(2), milliseconds{4000});
  EXPECT_EQ(policy.BackoffCeiling(3), milliseconds{8000});
  EXPECT_EQ(policy.BackoffCeiling(4), milliseconds{8000});
  EXPECT_EQ(policy.BackoffCeiling(1000), milliseconds{8000});  // no overflow however many retries
}

TEST(RetryPolicy, CapBelowADoublingIsRespectedExactly) {
  const auto policy = PolicyWith({0.0}, Options(4, milliseconds{300}, milliseconds{1000}));
  EXPECT_EQ(policy.BackoffCeiling(1), milliseconds{600});
  EXPECT_EQ(policy.BackoffCeiling(2), milliseconds{1000});
}

TEST(RetryPolicy, FullJitterSpansZeroToTheCeiling) {
  const auto timeout = OutcomeOf(OutcomeKind::kTimedOut);
  // Lowest draw: no wait at all.
  EXPECT_EQ(PolicyWith({0.0}).Decide(timeout, 1, milliseconds{0}).delay, milliseconds{0});
  // Half way, for retries 0, 1, 2: half of 1 s, 2 s, 4 s.
  const auto half = PolicyWith({0.5});
  EXPECT_EQ(half.Decide(timeout, 1, milliseconds{0}).delay, milliseconds{500});
  EXPECT_EQ(half.Decide(timeout, 2, milliseconds{0}).delay, milliseconds{1000});
  EXPECT_EQ(half.Decide(timeout, 3, milliseconds{0}).delay, milliseconds{2000});
  // The top of the range stays strictly below the ceiling.
  const auto top = PolicyWith({0.99999999}).Decide(timeout, 1, milliseconds{0});
  EXPECT_EQ(top.verdict, RetryVerdict::kRetry);
  EXPECT_LT(top.delay, milliseconds{1000});
  EXPECT_GE(top.delay, milliseconds{999});
}

TEST(RetryPolicy, RealRandomDelaysStayWithinTheirBounds) {
  auto random = std::make_shared<util::Mt19937RandomSource>();
  SCOPED_TRACE("seed " + std::to_string(random->seed()));
  const RetryPolicy policy(Options(10, milliseconds{100}, milliseconds{1600}, seconds{3600}), random);
  std::set<milliseconds::rep> seen;
  for (int round = 0; round < 200; ++round) {
    for (int attempts_made = 1; attempts_made < 10; ++attempts_made) {
      const auto d = policy.Decide(OutcomeOf(OutcomeKind::kNotSent), attempts_made, milliseconds{0});
      ASSERT_EQ(d.verdict, RetryVerdict::kRetry);
      EXPECT_GE(d.delay, milliseconds{0});
      EXPECT_LT(d.delay, policy.BackoffCeiling(attempts_made - 1));
      seen.insert(d.delay.count());
    }
  }
  EXPECT_GT(seen.size(), 100u);  // jittered, not a fixed schedule
}

TEST(RetryPolicy, StopsAtMaxAttempts) {
  const auto policy = PolicyWith({0.0}, Options(3));
  EXPECT_EQ(policy.Decide(OutcomeOf(OutcomeKind::kTimedOut), 2, milliseconds{0}).verdict, RetryVerdict::kRetry);
  EXPECT_EQ(policy.Decide(OutcomeOf(OutcomeKind::kTimedOut), 3, milliseconds{0}).verdict,
            RetryVerdict::kStopAttemptsExhausted);
}

TEST(RetryPolicy, NeverSleepsPastTheBudget) {
  const auto policy = PolicyWith({0.5}, Options(10, milliseconds{1000}, milliseconds{8000}, milliseconds{10000}));
  // Retry 2: ceiling 4 s, draw 2 s. With 8.5 s gone, 1.5 s remain: too little.
  EXPECT_EQ(policy.Decide(OutcomeOf(OutcomeKind::kTimedOut), 3, milliseconds{8500}).verdict,
            RetryVerdict::kStopBudgetExhausted);
  // With 7.9 s gone, 2.1 s remain: the 2 s wait fits.
  const auto fits = policy.Decide(OutcomeOf(OutcomeKind::kTimedOut), 3, milliseconds{7900});
  EXPECT_EQ(fits.verdict, RetryVerdict::kRetry);
  EXPECT_EQ(fits.delay, milliseconds{2000});
  // Already past the budget: stop, even with a zero draw.
  EXPECT_EQ(PolicyWith({0.0}, Options(10, milliseconds{1000}, milliseconds{8000}, milliseconds{10000}))
                .Decide(OutcomeOf(OutcomeKind::kTimedOut), 1, milliseconds{10000})
                .verdict,
            RetryVerdict::kStopBudgetExhausted);
}

TEST(RetryPolicy, RetryAfterRaisesTheDelay) {
  const auto policy = PolicyWith({0.1});  // jitter 100 ms on the first retry
  const auto d = policy.Decide(OutcomeOf(OutcomeKind::kThrottled, seconds{3}), 1, milliseconds{0});
  EXPECT_EQ(d.verdict, RetryVerdict::kRetry);
  EXPECT_EQ(d.delay, milliseconds{3000});
  // A Retry-After shorter than the jitter does not shorten it.
  const auto jitter_wins = PolicyWith({0.9}).Decide(OutcomeOf(OutcomeKind::kUnavailable, seconds{0}), 1,
                                                     milliseconds{0});
  EXPECT_EQ(jitter_wins.delay, milliseconds{900});
}

TEST(RetryPolicy, RetryAfterBeyondTheBudgetStops) {
  const auto policy = PolicyWith({0.0}, Options(4, milliseconds{1000}, milliseconds{8000}, milliseconds{15000}));
  EXPECT_EQ(policy.Decide(OutcomeOf(OutcomeKind::kThrottled, seconds{20}), 1, milliseconds{0}).verdict,
            RetryVerdict::kStopRetryAfterBeyondBudget);
  // 10 s gone, 5 s left: a 5 s Retry-After would start the attempt exactly at the end, so stop.
  EXPECT_EQ(policy.Decide(OutcomeOf(OutcomeKind::kUnavailable, seconds{5}), 1, milliseconds{10000}).verdict,
            RetryVerdict::kStopRetryAfterBeyondBudget);
  EXPECT_EQ(policy.Decide(OutcomeOf(OutcomeKind::kUnavailable, seconds{4}), 1, milliseconds{10000}).verdict,
            RetryVerdict::kRetry);
}

TEST(RetryPolicy, RetriesOnlyTransientOutcomes) {
  const auto policy = PolicyWith({0.0});
  for (const auto kind : {OutcomeKind::kNotSent, OutcomeKind::kTimedOut, OutcomeKind::kConnectionDropped,
                          OutcomeKind::kServerError, OutcomeKind::kUnavailable, OutcomeKind::kThrottled,
                          OutcomeKind::kInFlight, OutcomeKind::kUntrustedResponse}) {
    EXPECT_EQ(policy.Decide(OutcomeOf(kind), 1, milliseconds{0}).verdict, RetryVerdict::kRetry) << ToString(kind);
  }
  for (const auto kind : {OutcomeKind::kCaptured, OutcomeKind::kDeclined, OutcomeKind::kVoided, OutcomeKind::kPage,
                          OutcomeKind::kNotFound}) {
    EXPECT_EQ(policy.Decide(OutcomeOf(kind), 1, milliseconds{0}).verdict, RetryVerdict::kStopAnswered)
        << ToString(kind);
  }
  for (const auto kind : {OutcomeKind::kContractError, OutcomeKind::kMismatch}) {
    EXPECT_EQ(policy.Decide(OutcomeOf(kind), 1, milliseconds{0}).verdict, RetryVerdict::kStopNotRetryable)
        << ToString(kind);
  }
}

TEST(RetryPolicy, RejectsNonsensicalOptions) {
  auto random = std::make_shared<ScriptedRandom>(std::vector<double>{0.0});
  EXPECT_THROW(RetryPolicy(Options(0), random), std::invalid_argument);
  EXPECT_THROW(RetryPolicy(Options(3, milliseconds{2000}, milliseconds{1000}), random), std::invalid_argument);
  EXPECT_THROW(RetryPolicy(Options(), nullptr), std::invalid_argument);
}

// ---- RunWithRetries ----------------------------------------------------------------------------

const CaptureRequest kRequest{"merchant-1:key-1", 25000, "BRL", "ch_123", "pm_tok_visa"};

class RecordingObserver final : public AttemptObserver {
 public:
  boost::asio::awaitable<void> OnAttemptStarted(const AttemptContext& attempt,
                                                std::chrono::system_clock::time_point) override {
    events.push_back("start " + std::to_string(attempt.attempt_no) + " " + attempt.request_id);
    co_return;
  }
  boost::asio::awaitable<void> OnAttemptFinished(const AttemptRecord& record) override {
    events.push_back("finish " + std::to_string(record.attempt_no) + " " + record.request_id + " " +
                     std::string(ToString(record.outcome.kind)));
    co_return;
  }
  std::vector<std::string> events;
};

TEST(RunWithRetries, RetriesTransientFailuresWithTheSameKeyAndFreshRequestIds) {
  boost::asio::io_context io;
  FakeClock clock;
  ScriptedAcquirerClient client({Step{OutcomeOf(OutcomeKind::kNotSent), milliseconds{5}},
                                 Step{OutcomeOf(OutcomeKind::kTimedOut), milliseconds{2000}},
                                 Step{OutcomeOf(OutcomeKind::kCaptured), milliseconds{40}}},
                                &clock);
  const auto policy = PolicyWith({0.5, 0.25});
  RecordingObserver observer;
  const auto run = RunSync(io, CaptureWithRetries(client, kRequest, policy, clock, &observer));

  ASSERT_EQ(run.attempts.size(), 3u);
  EXPECT_EQ(run.stop, RetryVerdict::kStopAnswered);
  EXPECT_EQ(run.evidence(), EvidenceClass::kApproved);
  EXPECT_THAT(clock.sleeps, ::testing::ElementsAre(milliseconds{500}, milliseconds{500}));  // 0.5*1s, 0.25*2s
  ASSERT_EQ(client.captures.size(), 3u);
  for (const auto& sent : client.captures) {
    EXPECT_EQ(sent.idempotency_key, "merchant-1:key-1");
    EXPECT_EQ(sent.amount, 25000);
  }
  const std::set<std::string> ids(client.request_ids.begin(), client.request_ids.end());
  EXPECT_EQ(ids.size(), 3u);
  const std::regex uuid_v4("[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}");
  for (std::size_t i = 0; i < run.attempts.size(); ++i) {
    const auto& a = run.attempts[i];
    EXPECT_EQ(a.attempt_no, static_cast<int>(i + 1));
    EXPECT_EQ(a.request_id, client.request_ids[i]);
    EXPECT_TRUE(std::regex_match(a.request_id, uuid_v4)) << a.request_id;
    EXPECT_LE(a.started_at, a.finished_at);
  }
  EXPECT_EQ(run.attempts[1].finished_at - run.attempts[1].started_at, milliseconds{2000});
  EXPECT_EQ(observer.events.size(), 6u);
  EXPECT_EQ(observer.events[0], "start 1 " + client.request_ids[0]);
  EXPECT_EQ(observer.events[3], "finish 2 " + client.request_ids[1] + " timed_out");
  EXPECT_EQ(observer.events[5], "finish 3 " + client.request_ids[2] + " captured");
}

TEST(RunWithRetries, UsesTheRequestIdRecordedBeforeTheRunForTheFirstAttemptOnly) {
  boost::asio::io_context io;
  FakeClock clock;
  ScriptedAcquirerClient client({Step{OutcomeOf(OutcomeKind::kTimedOut)}, Step{OutcomeOf(OutcomeKind::kCaptured)}});
  const auto run = RunSync(io, RunWithRetries(
                                   PolicyWith({0.0}), clock,
                                   [&client](AttemptContext attempt) { return client.Capture(kRequest, attempt.request_id); },
                                   nullptr, std::string("recorded-with-intent")));
  ASSERT_EQ(run.attempts.size(), 2u);
  EXPECT_EQ(run.attempts[0].request_id, "recorded-with-intent");
  EXPECT_EQ(client.request_ids[0], "recorded-with-intent");
  EXPECT_NE(run.attempts[1].request_id, "recorded-with-intent");
  EXPECT_EQ(run.attempts[1].request_id, client.request_ids[1]);
}

TEST(RunWithRetries, NeverRetriesADecline) {
  boost::asio::io_context io;
  FakeClock clock;
  ScriptedAcquirerClient client({Step{OutcomeOf(OutcomeKind::kDeclined)}});
  const auto run = RunSync(io, CaptureWithRetries(client, kRequest, PolicyWith({0.0}), clock));
  EXPECT_EQ(run.attempts.size(), 1u);
  EXPECT_EQ(run.stop, RetryVerdict::kStopAnswered);
  EXPECT_EQ(run.evidence(), EvidenceClass::kDeclined);
  EXPECT_TRUE(clock.sleeps.empty());
}

// Issue 14, defect 5: a process shutting down ends its runs within one attempt or one backoff.
TEST(RetryPolicy, OnceStoppedNoRunRetriesAndCopiesAgree) {
  const auto policy = PolicyWith({0.0});
  const auto copy = policy;
  EXPECT_EQ(policy.Decide(OutcomeOf(OutcomeKind::kTimedOut), 1, milliseconds{0}).verdict, RetryVerdict::kRetry);
  policy.StopRetrying();
  EXPECT_TRUE(copy.Draining());
  EXPECT_EQ(copy.Decide(OutcomeOf(OutcomeKind::kTimedOut), 1, milliseconds{0}).verdict, RetryVerdict::kStopDraining);
  // An answer is still an answer.
  EXPECT_EQ(policy.Decide(OutcomeOf(OutcomeKind::kDeclined), 1, milliseconds{0}).verdict, RetryVerdict::kStopAnswered);
}

TEST(RunWithRetries, ARunWaitingOutABackoffWhenRetryingStopsEndsWithoutAnotherAttempt) {
  boost::asio::io_context io;
  const auto policy = PolicyWith({0.5});
  // The clock's sleep is where SIGTERM lands: the run wakes to a stopped policy.
  class StoppingClock final : public util::Clock {
   public:
    explicit StoppingClock(const RetryPolicy& policy) : policy_(policy) {}
    std::chrono::steady_clock::time_point SteadyNow() override { return inner_.SteadyNow(); }
    std::chrono::system_clock::time_point WallNow() override { return inner_.WallNow(); }
    boost::asio::awaitable<void> SleepFor(milliseconds delay) override {
      policy_.StopRetrying();
      co_await inner_.SleepFor(delay);
    }

   private:
    const RetryPolicy& policy_;
    FakeClock inner_;
  } clock(policy);
  ScriptedAcquirerClient client({Step{OutcomeOf(OutcomeKind::kTimedOut)}, Step{OutcomeOf(OutcomeKind::kCaptured)}});
  const auto run = RunSync(io, CaptureWithRetries(client, kRequest, policy, clock));
  EXPECT_EQ(run.attempts.size(), 1u);
  EXPECT_EQ(run.stop, RetryVerdict::kStopDraining);
  EXPECT_EQ(client.captures.size(), 1u);
}

TEST(RunWithRetries, NeverRetriesAContractError) {
  boost::asio::io_context io;
  FakeClock clock;
  ScriptedAcquirerClient client({Step{OutcomeOf(OutcomeKind::kNotSent)}, Step{OutcomeOf(OutcomeKind::kContractError)}});
  const auto run = RunSync(io, CaptureWithRetries(client, kRequest, PolicyWith({0.0}), clock));
  EXPECT_EQ(run.attempts.size(), 2u);
  EXPECT_EQ(run.stop, RetryVerdict::kStopNotRetryable);
  // The acquirer refused the request; that proves nothing about the key, so not not_sent.
  EXPECT_EQ(run.evidence(), EvidenceClass::kUnknown);
}

TEST(RunWithRetries, AttemptsExhaustedAfterUnknownsStaysUnknown) {
  boost::asio::io_context io;
  FakeClock clock;
  ScriptedAcquirerClient client({Step{OutcomeOf(OutcomeKind::kTimedOut)}, Step{OutcomeOf(OutcomeKind::kNotSent)},
                                 Step{OutcomeOf(OutcomeKind::kNotSent)}});
  const auto run = RunSync(io, CaptureWithRetries(client, kRequest, PolicyWith({0.0}, Options(3)), clock));
  EXPECT_EQ(run.attempts.size(), 3u);
  EXPECT_EQ(run.stop, RetryVerdict::kStopAttemptsExhausted);
  // The first attempt may have captured: later attempts that never left cannot undo that.
  EXPECT_EQ(run.last().evidence(), EvidenceClass::kNotSent);
  EXPECT_EQ(run.evidence(), EvidenceClass::kUnknown);
}

TEST(RunWithRetries, OnlyNotSentAttemptsProveNothingWasSent) {
  boost::asio::io_context io;
  FakeClock clock;
  ScriptedAcquirerClient client({Step{OutcomeOf(OutcomeKind::kNotSent)}, Step{OutcomeOf(OutcomeKind::kNotSent)}});
  const auto run = RunSync(io, CaptureWithRetries(client, kRequest, PolicyWith({0.0}, Options(2)), clock));
  EXPECT_EQ(run.evidence(), EvidenceClass::kNotSent);
}

TEST(RunWithRetries, ADeclineAfterAnUnknownSettlesIt) {
  boost::asio::io_context io;
  FakeClock clock;
  ScriptedAcquirerClient client({Step{OutcomeOf(OutcomeKind::kConnectionDropped)}, Step{OutcomeOf(OutcomeKind::kDeclined)}});
  const auto run = RunSync(io, CaptureWithRetries(client, kRequest, PolicyWith({0.0}), clock));
  EXPECT_EQ(run.evidence(), EvidenceClass::kDeclined);
}

TEST(RunWithRetries, RetryAfterBeyondTheBudgetStopsWithoutSleeping) {
  boost::asio::io_context io;
  FakeClock clock;
  ScriptedAcquirerClient client({Step{OutcomeOf(OutcomeKind::kThrottled, seconds{60})}});
  const auto run = RunSync(io, CaptureWithRetries(client, kRequest, PolicyWith({0.0}), clock));
  EXPECT_EQ(run.attempts.size(), 1u);
  EXPECT_EQ(run.stop, RetryVerdict::kStopRetryAfterBeyondBudget);
  EXPECT_TRUE(clock.sleeps.empty());
}

TEST(RunWithRetries, BudgetCountsTheTimeAttemptsTake) {
  boost::asio::io_context io;
  FakeClock clock;
  // Each attempt times out after 6 s, and the budget (15 s) counts that time, not only the waits.
  ScriptedAcquirerClient client({Step{OutcomeOf(OutcomeKind::kTimedOut), seconds{6}},
                                 Step{OutcomeOf(OutcomeKind::kTimedOut), seconds{6}},
                                 Step{OutcomeOf(OutcomeKind::kTimedOut), seconds{6}}},
                                &clock);
  const auto policy = PolicyWith({0.75}, Options(10, milliseconds{1000}, milliseconds{8000}, milliseconds{15000}));
  const auto run = RunSync(io, CaptureWithRetries(client, kRequest, policy, clock));
  // Attempt 1: 0-6 s, wait 750 ms; attempt 2: 6.75-12.75 s; next wait 1.5 s would end at 14.25 s < 15 s: attempt 3
  // runs to 20.25 s; the next wait cannot fit.
  EXPECT_EQ(run.attempts.size(), 3u);
  EXPECT_EQ(run.stop, RetryVerdict::kStopBudgetExhausted);
  EXPECT_THAT(clock.sleeps, ::testing::ElementsAre(milliseconds{750}, milliseconds{1500}));
}

TEST(RunWithRetries, LookupAndVoidKeepTheirKeys) {
  boost::asio::io_context io;
  FakeClock clock;
  ScriptedAcquirerClient client({Step{OutcomeOf(OutcomeKind::kServerError)}, Step{OutcomeOf(OutcomeKind::kNotFound)},
                                 Step{OutcomeOf(OutcomeKind::kInFlight)}, Step{OutcomeOf(OutcomeKind::kVoided)}});
  const auto lookup = RunSync(io, LookupWithRetries(client, LookupRequest{"k-1", std::nullopt}, PolicyWith({0.0}), clock));
  EXPECT_EQ(lookup.last().kind, OutcomeKind::kNotFound);
  EXPECT_EQ(lookup.attempts.size(), 2u);
  const auto voided = RunSync(io, VoidWithRetries(client, VoidRequest{"cap_1", "void:k-1"}, PolicyWith({0.0}), clock));
  EXPECT_EQ(voided.last().kind, OutcomeKind::kVoided);
  ASSERT_EQ(client.lookups.size(), 2u);
  EXPECT_EQ(client.lookups[1].idempotency_key, "k-1");
  ASSERT_EQ(client.voids.size(), 2u);
  EXPECT_EQ(client.voids[0].idempotency_key, "void:k-1");
  EXPECT_EQ(client.voids[1].idempotency_key, "void:k-1");
}

// ---- ListByWindow ----------------------------------------------------------------------------------

AttemptOutcome Page(std::vector<std::string> ids, std::optional<std::string> next) {
  auto o = OutcomeOf(OutcomeKind::kPage);
  for (auto& id : ids) o.page.push_back(Capture{id, CaptureStatus::kCaptured, 100, "BRL", "ref-" + id, "t", {}});
  o.next_page_token = std::move(next);
  return o;
}

TEST(ListByWindow, FollowsPageTokensToTheEnd) {
  boost::asio::io_context io;
  FakeClock clock;
  ScriptedAcquirerClient client({Step{Page({"a", "b"}, "p2")}, Step{OutcomeOf(OutcomeKind::kThrottled)},
                                 Step{Page({"c"}, "p3")}, Step{Page({}, std::nullopt)}});
  const auto result = RunSync(io, ListByWindow(client, ListWindow{}, PolicyWith({0.0}), clock));
  EXPECT_EQ(result.end, ListEnd::kComplete);
  EXPECT_EQ(result.pages, 3);
  ASSERT_EQ(result.captures.size(), 3u);
  EXPECT_EQ(result.captures[2].id, "c");
  EXPECT_THAT(client.page_tokens, ::testing::ElementsAre(std::nullopt, std::optional<std::string>("p2"),
                                                         std::optional<std::string>("p2"),
                                                         std::optional<std::string>("p3")));
}

TEST(ListByWindow, AFailedPageIsNeverAComplete) {
  boost::asio::io_context io;
  FakeClock clock;
  ScriptedAcquirerClient client({Step{Page({"a"}, "p2")}, Step{OutcomeOf(OutcomeKind::kContractError)}});
  const auto result = RunSync(io, ListByWindow(client, ListWindow{}, PolicyWith({0.0}), clock));
  EXPECT_EQ(result.end, ListEnd::kPageFailed);
  EXPECT_EQ(result.pages, 1);
  ASSERT_TRUE(result.failed_page.has_value());
  EXPECT_EQ(result.failed_page->last().kind, OutcomeKind::kContractError);
}

TEST(ListByWindow, ARepeatedTokenStopsInsteadOfLooping) {
  boost::asio::io_context io;
  FakeClock clock;
  ScriptedAcquirerClient client({Step{Page({"a"}, "p2")}, Step{Page({"b"}, "p2")}});
  const auto result = RunSync(io, ListByWindow(client, ListWindow{}, PolicyWith({0.0}), clock));
  EXPECT_EQ(result.end, ListEnd::kTokenRepeated);
  EXPECT_EQ(result.pages, 2);
}

}  // namespace
}  // namespace charge_outbox::acquirer
