#include "charge_outbox/app/shutdown.hpp"

#include <gtest/gtest.h>

#include <unistd.h>

#include <csignal>
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

}  // namespace
}  // namespace charge_outbox::app
