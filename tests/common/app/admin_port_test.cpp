// app::ReusedProbe: a readiness check behind it runs at most once per reuse period, however many probes
// come, and a probe that arrives while the check runs takes the last answer instead of asking again.
#include <gtest/gtest.h>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>

#include "await.hpp"
#include "charge_outbox/app/admin_port.hpp"

namespace charge_outbox::app {
namespace {

using namespace std::chrono_literals;
using testing::Await;

struct CountingCheck {
  int calls = 0;
  bool ok = true;
  ReusedProbe::Check Check() {
    return [this]() -> boost::asio::awaitable<ProbeAnswer> {
      ++calls;
      co_return ProbeAnswer{.ok = ok, .status = ok ? "ready" : "not ready"};
    };
  }
};

TEST(ReusedProbe, ManyProbesInOnePeriodAskOnceAndTheNextPeriodAsksAgain) {
  CountingCheck check;
  auto now = std::chrono::steady_clock::time_point{} + 1h;
  ReusedProbe probe(check.Check(), 1s, [&] { return now; });
  for (int i = 0; i < 1000; ++i) {
    const auto answer = Await(probe());
    ASSERT_TRUE(answer.ok);
    now += 500us;  // 1000 probes over half a second
  }
  EXPECT_EQ(check.calls, 1);

  // A failing answer is reused as well: a database down is not asked 1000 times a second either.
  check.ok = false;
  now += 600ms;
  EXPECT_FALSE(Await(probe()).ok);
  EXPECT_EQ(check.calls, 2);
  check.ok = true;
  now += 999ms;
  EXPECT_FALSE(Await(probe()).ok) << "still within the period of the failed answer";
  EXPECT_EQ(check.calls, 2);
  now += 1ms;
  EXPECT_TRUE(Await(probe()).ok);
  EXPECT_EQ(check.calls, 3);
}

TEST(ReusedProbe, NoReusePeriodAsksEveryTime) {
  CountingCheck check;
  ReusedProbe probe(check.Check(), 0ms);
  for (int i = 0; i < 10; ++i) Await(probe());
  EXPECT_EQ(check.calls, 10);
}

// While a check is out (a slow database), probes take the last answer: they neither queue behind it nor
// start checks of their own.
TEST(ReusedProbe, ProbesDuringARunningCheckTakeTheLastAnswer) {
  boost::asio::io_context io;
  int calls = 0;
  boost::asio::steady_timer gate(io, std::chrono::steady_clock::time_point::max());
  auto now = std::chrono::steady_clock::time_point{} + 1h;
  ReusedProbe probe(
      [&]() -> boost::asio::awaitable<ProbeAnswer> {
        ++calls;
        if (calls > 1) {
          boost::system::error_code ec;
          co_await gate.async_wait(boost::asio::redirect_error(boost::asio::use_awaitable, ec));
        }
        co_return ProbeAnswer{.ok = calls == 1, .status = "first"};
      },
      1s, [&] { return now; });
  int answered = 0;
  int took_last = 0;
  const auto ask = [&]() -> boost::asio::awaitable<void> {
    const auto answer = co_await probe();
    ++answered;
    if (answer.status == "first") ++took_last;
  };
  boost::asio::co_spawn(io, ask(), boost::asio::detached);
  io.run();
  io.restart();
  ASSERT_EQ(calls, 1);
  now += 2s;  // the answer is stale: the next probe checks, and hangs on the gate
  boost::asio::co_spawn(io, ask(), boost::asio::detached);
  io.run_for(10ms);
  for (int i = 0; i < 50; ++i) boost::asio::co_spawn(io, ask(), boost::asio::detached);
  io.run_for(50ms);
  EXPECT_EQ(calls, 2) << "probes during the check started checks of their own";
  EXPECT_EQ(answered, 51) << "probes queued behind the running check";
  EXPECT_EQ(took_last, 51);
  gate.cancel();
  io.run_for(50ms);
  EXPECT_EQ(answered, 52);
}

}  // namespace
}  // namespace charge_outbox::app
