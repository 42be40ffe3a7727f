// AttemptRecorder: how every actor (charge-api, the reconciler, the window report) records its acquirer
// calls in acquirer_attempts, and RunRecorded, which runs one acquirer operation under a retry policy with
// every attempt on record.
//
// One rule: an attempt that cannot be recorded is not sent. Each attempt is recorded as started before a
// byte of it leaves (so a crash mid-call still leaves it on record, and the reconciler's not-found rule
// can rely on the record); an attempt whose start could not be written becomes kNotSent without touching
// the network. A capture or void is recorded only while the caller still owns the charge (which renews its
// lease), and a capture only before the deadline with no void on record (ChargeStore::StartAttempt); when
// the store refuses one, the run stops there and refusal() says why. Finishes are written lazily: the
// previous attempt's before the next starts, the last one handed to the statement that resolves or
// releases the charge (one round trip saved on the common path).
//
// One per operation; lives on the coroutine frame of its caller. Not thread-safe.
#pragma once

#include <boost/asio/awaitable.hpp>

#include <chrono>
#include <optional>
#include <string>
#include <utility>

#include "charge_outbox/acquirer/model.hpp"
#include "charge_outbox/acquirer/retry_policy.hpp"
#include "charge_outbox/charges/charge_store.hpp"

namespace charge_outbox::charges {

// What a capture or void run needs to record its attempts: the caller's lease, and for a capture the
// charge's deadline.
struct Ownership {
  Lease lease;
  std::chrono::milliseconds deadline{0};
};

class AttemptRecorder final : public acquirer::AttemptObserver {
 public:
  // `actor` is "charge-api" or "reconciler". `trace_id`: the trace of the request or run working on the
  // charge, which its log lines carry ("" for none). `ownership`: required for captures and voids.
  // `first_attempt_on_record`: the number of an attempt already recorded as started for attempt 1 of this
  // run (charge-api records it with the intent). `in_review`: a person's void of a charge in needs_review
  // (AttemptStart::in_review), recorded without ownership and only while the charge is in review.
  AttemptRecorder(ChargeStore& store, std::string charge_id, acquirer::Operation operation, std::string actor,
                  std::string trace_id, std::optional<Ownership> ownership = std::nullopt,
                  std::optional<int> first_attempt_on_record = std::nullopt, bool in_review = false);

  boost::asio::awaitable<void> OnAttemptStarted(const acquirer::AttemptContext& attempt,
                                                std::chrono::system_clock::time_point started_at) override;
  boost::asio::awaitable<void> OnAttemptFinished(const acquirer::AttemptRecord& record) override;
  bool StopRun() const override { return refusal_.has_value(); }

  // Why the store refused to record an attempt of this run (which was then not sent, and the run stopped).
  std::optional<Refusal> refusal() const { return refusal_; }

  // Runs `call()` (an awaitable AttemptOutcome) only if the current attempt is on record; otherwise
  // nothing leaves this process, which is exactly what kNotSent says.
  template <typename Call>
  boost::asio::awaitable<acquirer::AttemptOutcome> Send(Call call) {
    if (current_ > 0) co_return co_await call();
    co_return NotRecorded();
  }

  // Writes the finish of the last attempt now (before a follow-up operation, or reading the history).
  // False if it could not be written (the attempt then stays unfinished on record, which only ever makes
  // later readings more careful).
  boost::asio::awaitable<bool> FlushFinish();
  // Hands the last attempt's finish to a statement that writes it along with its own change.
  std::optional<AttemptFinish> TakeLastFinish() { return std::exchange(pending_, std::nullopt); }

 private:
  acquirer::AttemptOutcome NotRecorded() const;

  ChargeStore& store_;
  std::string charge_id_;
  acquirer::Operation operation_;
  std::string actor_;
  std::string trace_id_;
  std::optional<Ownership> ownership_;
  std::optional<int> first_attempt_on_record_;
  bool in_review_ = false;
  int current_ = 0;  // the attempt number on record, 0 if its start could not be written
  std::optional<AttemptFinish> pending_;
  std::optional<Refusal> refusal_;
};

// Runs one acquirer operation under `policy`, recorded by `recorder`. `call(request_id)` makes one
// attempt and returns an awaitable AttemptOutcome. `first_request_id`: attempt 1's id when it was
// recorded before the run (with the intent), so the record and the wire agree.
template <typename Call>
boost::asio::awaitable<acquirer::RetryRun> RunRecorded(const acquirer::RetryPolicy& policy, util::Clock& clock,
                                                       AttemptRecorder& recorder, Call call,
                                                       std::optional<std::string> first_request_id = std::nullopt) {
  acquirer::AttemptFunction attempt =
      [&recorder, call](acquirer::AttemptContext context) -> boost::asio::awaitable<acquirer::AttemptOutcome> {
    const auto send = [&] { return call(context.request_id); };
    co_return co_await recorder.Send(send);
  };
  co_return co_await acquirer::RunWithRetries(policy, clock, attempt, &recorder, std::move(first_request_id));
}

}  // namespace charge_outbox::charges
