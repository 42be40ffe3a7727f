// Clock: the time a coroutine reads and waits on (a monotonic clock for budgets and deadlines, the wall
// clock for records, and sleeping), injected so tests run a whole schedule without waiting. AsioClock
// is the real one. charge-api and the reconciler read all their time through it, not only retries.
#pragma once

#include <boost/asio/awaitable.hpp>

#include <chrono>

namespace charge_outbox::util {

class Clock {
 public:
  virtual ~Clock() = default;
  virtual std::chrono::steady_clock::time_point SteadyNow() = 0;
  virtual std::chrono::system_clock::time_point WallNow() = 0;
  virtual boost::asio::awaitable<void> SleepFor(std::chrono::milliseconds delay) = 0;
};

// The real clocks; sleeps on an Asio timer of the awaiting coroutine's executor. Stateless, thread-safe.
class AsioClock final : public Clock {
 public:
  std::chrono::steady_clock::time_point SteadyNow() override;
  std::chrono::system_clock::time_point WallNow() override;
  boost::asio::awaitable<void> SleepFor(std::chrono::milliseconds delay) override;
};

}  // namespace charge_outbox::util
