#include "charge_outbox/app/shutdown.hpp"

#include <gtest/gtest.h>

#include <pthread.h>
#include <unistd.h>

#include <csignal>
#include <optional>
#include <thread>

namespace charge_outbox::app {
namespace {

using namespace std::chrono_literals;

TEST(ShutdownSignals, TakesAPendingSigtermInsteadOfDying) {
  ShutdownSignals signals;
  ASSERT_EQ(::raise(SIGTERM), 0);  // blocked, so it stays pending instead of killing the test
  EXPECT_EQ(signals.WaitFor(1s), SIGTERM);
}

TEST(ShutdownSignals, TakesSigint) {
  ShutdownSignals signals;
  ASSERT_EQ(::raise(SIGINT), 0);
  EXPECT_EQ(signals.Wait(), SIGINT);
}

TEST(ShutdownSignals, WaitForTimesOutWithoutASignal) {
  ShutdownSignals signals;
  const auto started = std::chrono::steady_clock::now();
  EXPECT_EQ(signals.WaitFor(50ms), std::nullopt);
  EXPECT_GE(std::chrono::steady_clock::now() - started, 50ms);
}

TEST(ShutdownSignals, ThreadsStartedAfterwardInheritTheBlock) {
  ShutdownSignals signals;
  std::thread worker([] { ::kill(::getpid(), SIGTERM); });  // process-directed: any unblocked thread would die
  worker.join();
  EXPECT_EQ(signals.WaitFor(1s), SIGTERM);
}

TEST(DrainBudget, LeavesAQuarterForClosingCappedAtTwoSeconds) {
  EXPECT_EQ(DrainBudget(1000ms), 750ms);
  EXPECT_EQ(DrainBudget(30s), 28s);
  EXPECT_EQ(DrainBudget(0ms), 0ms);
}

TEST(StopWithin, CallsStopWithTheDrainBudgetAndReturns) {
  std::chrono::milliseconds given{-1};
  StopWithin(400ms, [&](std::chrono::milliseconds drain) { given = drain; });
  EXPECT_EQ(given, 300ms);
}

TEST(StopWithinDeathTest, HardExitsWhenStopOverrunsTheDeadline) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(StopWithin(100ms, [](std::chrono::milliseconds) { std::this_thread::sleep_for(30s); }),
              ::testing::ExitedWithCode(kExitShutdownOverrun), "");
}

TEST(RunUntilSignal, StopsOnSigtermAndReturnsZero) {
  ShutdownSignals signals;
  bool stopped = false;
  ASSERT_EQ(::raise(SIGTERM), 0);
  EXPECT_EQ(RunUntilSignal(signals, 1s, [&](std::chrono::milliseconds) { stopped = true; }), 0);
  EXPECT_TRUE(stopped);
}

TEST(RunUntilSignal, AServiceThatEndsByItselfIsStoppedAtOnceAndItsStatusReturned) {
  ShutdownSignals signals;
  std::optional<std::chrono::milliseconds> drain_given;
  int polls = 0;
  const auto status = RunUntilSignal(
      signals, 5s, [&](std::chrono::milliseconds drain) { drain_given = drain; },
      [&]() -> std::optional<int> { return ++polls < 2 ? std::nullopt : std::optional<int>(4); });
  EXPECT_EQ(status, 4);
  EXPECT_EQ(drain_given, 0ms);  // nothing to drain: the loop is gone
}

TEST(RunUntilSignal, ASignalStillStopsAServiceThatCouldEndByItself) {
  ShutdownSignals signals;
  std::optional<std::chrono::milliseconds> drain_given;
  ASSERT_EQ(::raise(SIGINT), 0);
  EXPECT_EQ(RunUntilSignal(signals, 400ms, [&](std::chrono::milliseconds drain) { drain_given = drain; },
                           [] { return std::optional<int>(); }),
            0);
  EXPECT_EQ(drain_given, 300ms);
}

TEST(ShutdownSignals, UnblockedLeavesSigtermAtItsDefault) {
  const auto signals = ShutdownSignals::Unblocked();
  sigset_t mask;
  pthread_sigmask(SIG_BLOCK, nullptr, &mask);
  EXPECT_EQ(sigismember(&mask, SIGTERM), 0);
  EXPECT_EQ(signals.WaitFor(10ms), std::nullopt);
}

}  // namespace
}  // namespace charge_outbox::app
