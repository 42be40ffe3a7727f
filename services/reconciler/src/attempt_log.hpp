// AttemptLog: how the reconciler records its acquirer calls in acquirer_attempts (actor "reconciler"),
// and WithDbRetries, the few quick retries its idempotent statements get on transient database trouble.
#pragma once

#include <boost/asio/awaitable.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <chrono>
#include <optional>
#include <string>

#include "charge_outbox/acquirer/acquirer_client.hpp"
#include "charge_outbox/acquirer/retry_policy.hpp"
#include "charge_outbox/charges/charge_store.hpp"

namespace charge_outbox::reconciler {

inline constexpr const char* kActor = "reconciler";

bool RetryableDbError(const db::DbError& error);

// Calls `make_call()` (which returns an awaitable DbResult) and, on a transient error, again up to three
// times after 100, 200 and 400 ms. Only for statements that are safe to repeat: a transition applies once
// and is then a no-op; a reschedule or a finish writes the same values again.
template <typename MakeCall>
auto WithDbRetries(MakeCall make_call) -> decltype(make_call()) {
  auto result = co_await make_call();
  for (int retry = 0; !result && retry < 3 && RetryableDbError(result.error()); ++retry) {
    boost::asio::steady_timer timer(co_await boost::asio::this_coro::executor, std::chrono::milliseconds{100 << retry});
    co_await timer.async_wait(boost::asio::use_awaitable);
    result = co_await make_call();
  }
  co_return result;
}

// Records each attempt of one acquirer operation on one charge as it happens: started before a byte is
// sent (so a crash mid-call still leaves it on record), finished when it ends. The last attempt's finish
// is handed to the statement that resolves or reschedules the charge, saving a round trip. An attempt
// that cannot be recorded is not sent (Send), so no call escapes the record.
//
// One per operation; lives on the coroutine frame of the caller. Not thread-safe.
class AttemptLog final : public acquirer::AttemptObserver {
 public:
  AttemptLog(charges::ChargeStore& store, std::string charge_id, acquirer::Operation operation);

  boost::asio::awaitable<void> OnAttemptStarted(const acquirer::AttemptContext& attempt,
                                                std::chrono::system_clock::time_point started_at) override;
  boost::asio::awaitable<void> OnAttemptFinished(const acquirer::AttemptRecord& record) override;

  // Runs `call()` (an awaitable AttemptOutcome) only if the current attempt is on record; otherwise
  // nothing leaves this process, which is exactly what kNotSent says.
  template <typename Call>
  boost::asio::awaitable<acquirer::AttemptOutcome> Send(Call call) {
    if (current_ > 0) co_return co_await call();
    co_return NotRecorded();
  }

  // Writes the finish of the last attempt now (before a follow-up operation, or on an error path).
  boost::asio::awaitable<void> FlushFinish();
  // Hands the last attempt's finish to a statement that writes it along with its own change.
  std::optional<charges::AttemptFinish> TakeLastFinish() { return std::exchange(pending_, std::nullopt); }

 private:
  acquirer::AttemptOutcome NotRecorded() const;

  charges::ChargeStore& store_;
  std::string charge_id_;
  acquirer::Operation operation_;
  int current_ = 0;  // the attempt number on record, 0 if the start could not be written
  std::optional<charges::AttemptFinish> pending_;
};

// Runs one acquirer operation under `policy`, recorded by `log`. `call(request_id)` makes one attempt.
template <typename Call>
boost::asio::awaitable<acquirer::RetryRun> RunRecorded(const acquirer::RetryPolicy& policy,
                                                       acquirer::RetryClock& clock, AttemptLog& log, Call call) {
  acquirer::AttemptFunction attempt =
      [&log, call](acquirer::AttemptContext context) -> boost::asio::awaitable<acquirer::AttemptOutcome> {
    const auto send = [&] { return call(context.request_id); };
    co_return co_await log.Send(send);
  };
  co_return co_await acquirer::RunWithRetries(policy, clock, attempt, &log);
}

}  // namespace charge_outbox::reconciler
