// retry::Backoff, the one schedule of waits: its ceilings (doubling, cap, no overflow), both jitters'
// bounds, the budget and Retry-After, the keys it is read from, all with a scripted random source, so
// every expected wait is exact.
#include "charge_outbox/retry/backoff.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <stdexcept>

#include "charge_outbox/config/config.hpp"
#include "clock_fakes.hpp"

namespace charge_outbox::retry {
namespace {

using namespace std::chrono_literals;
using std::chrono::milliseconds;
using charge_outbox::testing::ScriptedRandom;
using ::testing::HasSubstr;

// Counts the numbers drawn, to show when none is.
class CountingRandom final : public util::RandomSource {
 public:
  double NextUnit() override {
    ++draws;
    return 0.5;
  }
  int draws = 0;
};

Backoff Full(milliseconds base = 1000ms, milliseconds max = 8000ms, milliseconds budget = milliseconds::max()) {
  return Backoff(BackoffOptions{base, max, Jitter::kFull, budget});
}

TEST(Backoff, CeilingDoublesUpToTheCapWithoutOverflow) {
  const auto b = Full();
  EXPECT_EQ(b.Ceiling(0), 1000ms);
  EXPECT_EQ(b.Ceiling(1), 2000ms);
  EXPECT_EQ(b.Ceiling(2), 4000ms);
  EXPECT_EQ(b.Ceiling(3), 8000ms);
  EXPECT_EQ(b.Ceiling(4), 8000ms);
  EXPECT_EQ(b.Ceiling(1'000'000), 8000ms);
  EXPECT_EQ(b.Ceiling(-3), 1000ms);  // a negative index is the first retry
  const auto odd = Full(300ms, 1000ms);
  EXPECT_EQ(odd.Ceiling(1), 600ms);
  EXPECT_EQ(odd.Ceiling(2), 1000ms);  // the cap, not 1200 ms
  const auto huge = Full(milliseconds::max() / 3, milliseconds::max());
  EXPECT_EQ(huge.Ceiling(5), milliseconds::max());  // saturates instead of wrapping
}

TEST(Backoff, FullJitterSpansZeroToJustBelowTheCeiling) {
  const auto b = Full();
  ScriptedRandom low({0.0}), half({0.5}), high({0.999999}), one({1.0}), beyond({7.0}), negative({-2.0});
  EXPECT_EQ(b.Delay(0, low), 0ms);
  EXPECT_EQ(b.Delay(2, half), 2000ms);
  EXPECT_EQ(b.Delay(0, high), 999ms);
  EXPECT_EQ(b.Delay(3, one), 7999ms);     // half-open: never the ceiling itself
  EXPECT_EQ(b.Delay(0, beyond), 999ms);   // a source out of range is clamped
  EXPECT_EQ(b.Delay(0, negative), 0ms);
}

TEST(Backoff, EqualJitterSpansHalfTheCeilingToJustBelowIt) {
  const Backoff b(BackoffOptions{30s, 15min, Jitter::kEqual});
  ScriptedRandom low({0.0}), high({0.999999}), one({1.0});
  EXPECT_EQ(b.Delay(0, low), 15s);
  EXPECT_EQ(b.Delay(0, high), 29999ms);
  EXPECT_EQ(b.Delay(5, low), 450s);  // 960 s capped at 900 s, then halved
  EXPECT_EQ(b.Delay(0, one), 29999ms);
}

TEST(Backoff, AZeroCeilingWaitsNothing) {
  ScriptedRandom any({0.7});
  EXPECT_EQ(Full(0ms, 0ms).Delay(4, any), 0ms);
}

TEST(Backoff, SeededSourceGivesTheSameScheduleAndStaysInBounds) {
  const auto b = Full(100ms, 2000ms);
  util::Mt19937RandomSource first(42), second(42);
  for (int retry = 0; retry < 1000; ++retry) {
    const auto d = b.Delay(retry % 8, first);
    EXPECT_EQ(d, b.Delay(retry % 8, second)) << "seed 42, retry " << retry;
    EXPECT_GE(d, 0ms);
    EXPECT_LT(d, b.Ceiling(retry % 8)) << "seed 42, retry " << retry;
  }
}

TEST(Backoff, NoBudgetAlwaysWaits) {
  ScriptedRandom half({0.5});
  const auto wait = Full().Next(40, half, 1000h);
  EXPECT_EQ(wait.verdict, WaitVerdict::kWait);
  EXPECT_EQ(wait.delay, 4000ms);
}

TEST(Backoff, ASpentBudgetStopsBeforeDrawing) {
  const auto b = Full(1000ms, 8000ms, 15s);
  CountingRandom random;
  EXPECT_EQ(b.Next(0, random, 15s).verdict, WaitVerdict::kBudgetExhausted);
  EXPECT_EQ(b.Next(0, random, 20s).verdict, WaitVerdict::kBudgetExhausted);
  EXPECT_EQ(random.draws, 0);
}

TEST(Backoff, AWaitEndingPastTheBudgetStops) {
  const auto b = Full(1000ms, 8000ms, 15s);
  ScriptedRandom half({0.5});
  // 14 s spent, 1 s left: a 2 s wait (half of 4 s) would end past it.
  EXPECT_EQ(b.Next(2, half, 14s).verdict, WaitVerdict::kBudgetExhausted);
  // 12 s spent, 3 s left: it fits.
  const auto wait = b.Next(2, half, 12s);
  EXPECT_EQ(wait.verdict, WaitVerdict::kWait);
  EXPECT_EQ(wait.delay, 2000ms);
}

TEST(Backoff, RetryAfterRaisesTheWaitButNeverLowersIt) {
  const auto b = Full(1000ms, 8000ms, 15s);
  ScriptedRandom low({0.0}), high({0.999});
  const auto raised = b.Next(0, low, 0ms, 3s);
  EXPECT_EQ(raised.verdict, WaitVerdict::kWait);
  EXPECT_EQ(raised.delay, 3000ms);
  const auto kept = b.Next(3, high, 0ms, 1s);
  EXPECT_EQ(kept.delay, 7992ms);
  ScriptedRandom unbudgeted({0.0});
  EXPECT_EQ(Full().Next(0, unbudgeted, 1000h, 90s).delay, 90s);  // no budget: any Retry-After is honoured
}

TEST(Backoff, RetryAfterBeyondTheBudgetStops) {
  const auto b = Full(1000ms, 8000ms, 15s);
  ScriptedRandom low({0.0});
  EXPECT_EQ(b.Next(0, low, 10s, 5s).verdict, WaitVerdict::kRetryAfterBeyondBudget);  // exactly what is left
  EXPECT_EQ(b.Next(0, low, 10s, 4999ms).verdict, WaitVerdict::kWait);
}

TEST(Backoff, NonsensicalOptionsAreRefused) {
  EXPECT_THROW(Full(2s, 1s), std::invalid_argument);
  EXPECT_THROW(Full(-1ms, 1s), std::invalid_argument);
  EXPECT_THROW(Full(1s, 2s, -1ms), std::invalid_argument);
  EXPECT_NO_THROW(Full(0ms, 0ms, 0ms));
}

config::EnvLookup NoEnv() {
  return [](const std::string&) -> std::optional<std::string> { return std::nullopt; };
}

TEST(LoadBackoffOptions, ReadsTheScopesBackoffKeysAndKeepsTheDefaultsAndJitter) {
  auto r = config::ConfigReader::FromString("relay:\n  backoff:\n    base: 50ms\n    max: 2s\n", NoEnv());
  const auto o = LoadBackoffOptions(r, "relay", BackoffOptions{200ms, 5s, Jitter::kEqual}, 1ms, 10min);
  EXPECT_EQ(o.base, 50ms);
  EXPECT_EQ(o.max, 2s);
  EXPECT_EQ(o.jitter, Jitter::kEqual);
  EXPECT_EQ(o.budget, milliseconds::max());  // no budget by default: none is read
  EXPECT_NO_THROW(r.RejectUnknownKeys());

  auto defaults = config::ConfigReader::FromString("", NoEnv());
  const auto d = LoadBackoffOptions(defaults, "inbox", BackoffOptions{200ms, 5s}, 1ms, 10min);
  EXPECT_EQ(d.base, 200ms);
  EXPECT_EQ(d.max, 5s);
}

TEST(LoadBackoffOptions, ReadsABudgetWhereTheDefaultsHaveOneAndTheEnvironmentWins) {
  auto r = config::ConfigReader::FromString("acquirer:\n  retry:\n    backoff:\n      budget: 20s\n",
                                            [](const std::string& name) -> std::optional<std::string> {
                                              if (name == "ACQUIRER_RETRY_BACKOFF_BUDGET") return "30s";
                                              return std::nullopt;
                                            });
  const auto o = LoadBackoffOptions(r, "acquirer.retry", BackoffOptions{1s, 8s, Jitter::kFull, 15s}, 0ms, 24h);
  EXPECT_EQ(o.budget, 30s);
}

TEST(LoadBackoffOptions, AMaxShorterThanTheBaseNamesTheMaxKey) {
  auto r = config::ConfigReader::FromString("reconciler:\n  backoff:\n    base: 5s\n    max: 1s\n", NoEnv());
  try {
    LoadBackoffOptions(r, "reconciler", BackoffOptions{30s, 15min, Jitter::kEqual}, 1ms, 24h);
    FAIL() << "expected a ConfigError";
  } catch (const config::ConfigError& e) {
    EXPECT_EQ(e.key(), "reconciler.backoff.max");
    EXPECT_THAT(e.problem(), HasSubstr("reconciler.backoff.base"));
  }
}

}  // namespace
}  // namespace charge_outbox::retry
