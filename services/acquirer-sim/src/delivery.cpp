#include "delivery.hpp"

#include <spdlog/spdlog.h>

#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>

namespace charge_outbox::acquirer_sim {

namespace asio = boost::asio;

asio::awaitable<void> Sleep(std::chrono::milliseconds duration) {
  if (duration.count() <= 0) co_return;
  asio::steady_timer timer(co_await asio::this_coro::executor, duration);
  co_await timer.async_wait(asio::use_awaitable);
}

asio::awaitable<http::Reply> Deliver(const FaultDecision& decision, http::Response response, std::string_view what) {
  if (decision.drop) {
    spdlog::info("fault: drop; {} done, connection closed without an answer", what);
    co_return http::Reply{http::Response{}, true};
  }
  if (decision.timeout) {
    spdlog::info("fault: timeout; {} done, answering in {}ms", what, decision.timeout_delay.count());
    co_await Sleep(decision.timeout_delay);
  }
  co_return Answer(std::move(response));
}

}  // namespace charge_outbox::acquirer_sim
