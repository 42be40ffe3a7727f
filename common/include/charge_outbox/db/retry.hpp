// WithDbRetries: the few quick retries an idempotent statement gets on transient database trouble, the
// same for every caller (charge-api's result statement, the reconciler's claims and transitions, the
// attempt recorder).
#pragma once

#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <chrono>

#include "charge_outbox/db/database.hpp"
#include "charge_outbox/retry/backoff.hpp"

namespace charge_outbox::db {

// Calls `make_call()` (which returns an awaitable DbResult) and, on a transient error (RetryabilityOf), again
// up to three times after 100, 200 and 400 ms (retry::Backoff's ceilings, unjittered: see backoff.hpp). Only for statements that are safe to repeat: a transition
// applies once and is then a no-op; a reschedule or a finish writes the same values again; an in-doubt
// commit is settled by what the statement finds the second time.
template <typename MakeCall>
auto WithDbRetries(MakeCall make_call) -> decltype(make_call()) {
  static const retry::Backoff backoff(retry::BackoffOptions{std::chrono::milliseconds{100}, std::chrono::milliseconds{400}});
  auto result = co_await make_call();
  for (int n = 0; !result && n < 3 && retry::IsTransient(RetryabilityOf(result.error())); ++n) {
    boost::asio::steady_timer timer(co_await boost::asio::this_coro::executor, backoff.Ceiling(n));
    co_await timer.async_wait(boost::asio::use_awaitable);
    result = co_await make_call();
  }
  co_return result;
}

}  // namespace charge_outbox::db
