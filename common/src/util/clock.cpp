#include "charge_outbox/util/clock.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>

namespace charge_outbox::util {

namespace asio = boost::asio;

std::chrono::steady_clock::time_point AsioClock::SteadyNow() { return std::chrono::steady_clock::now(); }

std::chrono::system_clock::time_point AsioClock::WallNow() { return std::chrono::system_clock::now(); }

asio::awaitable<void> AsioClock::SleepFor(std::chrono::milliseconds delay) {
  asio::steady_timer timer(co_await asio::this_coro::executor, delay);
  // A cancelled sleep (executor shutting down) simply ends early; the next attempt or the caller decides.
  co_await timer.async_wait(asio::as_tuple(asio::use_awaitable));
}

}  // namespace charge_outbox::util
