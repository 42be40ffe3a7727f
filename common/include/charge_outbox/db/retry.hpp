// WithDbRetries: the few quick retries an idempotent statement gets on transient database trouble, the
// same for every caller (charge-api's result statement, the reconciler's claims and transitions, the
// attempt recorder).
#pragma once

#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <chrono>

#include "charge_outbox/db/database.hpp"

namespace charge_outbox::db {

// Calls `make_call()` (which returns an awaitable DbResult) and, on a transient error (IsTransient), again
// up to three times after 100, 200 and 400 ms. Only for statements that are safe to repeat: a transition
// applies once and is then a no-op; a reschedule or a finish writes the same values again; an in-doubt
// commit is settled by what the statement finds the second time.
template <typename MakeCall>
auto WithDbRetries(MakeCall make_call) -> decltype(make_call()) {
  auto result = co_await make_call();
  for (int retry = 0; !result && retry < 3 && IsTransient(result.error()); ++retry) {
    boost::asio::steady_timer timer(co_await boost::asio::this_coro::executor, std::chrono::milliseconds{100 << retry});
    co_await timer.async_wait(boost::asio::use_awaitable);
    result = co_await make_call();
  }
  co_return result;
}

}  // namespace charge_outbox::db
