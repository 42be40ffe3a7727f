#include "charge_outbox/failpoints/failpoints.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/use_future.hpp>

#include "charge_outbox/config/config.hpp"

namespace charge_outbox::failpoints {
namespace {

using ::testing::HasSubstr;

class FailpointsTest : public ::testing::Test {
 protected:
  void TearDown() override { Configure(""); }
};

TEST_F(FailpointsTest, ParsesEveryActionAndSeparator) {
  const auto points = Parse(" charge.after_intent_commit=crash ; relay.after_publish_before_mark=sleep(250),"
                            "reconciler.after_acquirer_lookup=error");
  ASSERT_EQ(points.size(), 3u);
  EXPECT_EQ(points.at("charge.after_intent_commit").action, Action::kCrash);
  EXPECT_EQ(points.at("relay.after_publish_before_mark").action, Action::kSleep);
  EXPECT_EQ(points.at("relay.after_publish_before_mark").sleep, std::chrono::milliseconds{250});
  EXPECT_EQ(points.at("reconciler.after_acquirer_lookup").action, Action::kError);
}

TEST_F(FailpointsTest, UnknownPointOrActionIsAConfigError) {
  try {
    Parse("charge.after_acquirer_respnse=crash");
    FAIL() << "a misspelt point was accepted";
  } catch (const config::ConfigError& e) {
    EXPECT_EQ(e.key(), "FAILPOINTS");
    EXPECT_THAT(e.problem(), HasSubstr("unknown failpoint \"charge.after_acquirer_respnse\""));
  }
  EXPECT_THROW(Parse("charge.after_intent_commit=explode"), config::ConfigError);
  EXPECT_THROW(Parse("charge.after_intent_commit=sleep(x)"), config::ConfigError);
  EXPECT_THROW(Parse("charge.after_intent_commit"), config::ConfigError);
}

TEST_F(FailpointsTest, ConfiguredErrorIsHitAndOthersAreNot) {
  Configure("charge.before_intent_commit=error");
  EXPECT_TRUE(Hit("charge.before_intent_commit"));
  EXPECT_FALSE(Hit("charge.after_intent_commit"));
  Configure("");
  EXPECT_FALSE(Hit("charge.before_intent_commit"));
}

TEST_F(FailpointsTest, SleepStallsAtLeastTheGivenTime) {
  Configure("charge.after_intent_commit=sleep(30)");
  const auto started = std::chrono::steady_clock::now();
  EXPECT_FALSE(Hit("charge.after_intent_commit"));
  EXPECT_GE(std::chrono::steady_clock::now() - started, std::chrono::milliseconds{30});
}

TEST_F(FailpointsTest, HitAsyncFailsOrSleepsOnTheCoroutinesExecutor) {
  boost::asio::io_context io;
  Configure("charge.after_intent_commit=error;charge.before_intent_commit=sleep(20)");
  auto failed = boost::asio::co_spawn(io, HitAsync("charge.after_intent_commit"), boost::asio::use_future);
  auto slept = boost::asio::co_spawn(io, HitAsync("charge.before_intent_commit"), boost::asio::use_future);
  auto unset = boost::asio::co_spawn(io, HitAsync("charge.after_acquirer_response"), boost::asio::use_future);
  const auto started = std::chrono::steady_clock::now();
  io.run();  // one thread: the sleep must not have blocked it while the others completed
  EXPECT_TRUE(failed.get());
  EXPECT_FALSE(slept.get());
  EXPECT_FALSE(unset.get());
  EXPECT_GE(std::chrono::steady_clock::now() - started, std::chrono::milliseconds{20});
}

TEST_F(FailpointsTest, CrashKillsTheProcessWithSigkill) {
  EXPECT_EXIT(
      {
        Configure("charge.after_acquirer_response=crash");
        Hit("charge.after_acquirer_response");
      },
      ::testing::KilledBySignal(SIGKILL), "");
}

}  // namespace
}  // namespace charge_outbox::failpoints
