// How long charge-api asks a client to wait before it asks again about a charge whose outcome it cannot
// give yet: the Retry-After of a 202 (pending, needs_review) and of a 409 (the key's request in flight),
// each from what this instance knows of what the charge waits for (docs/charge-api.md, "When to ask again").
#pragma once

#include <chrono>

#include "charge_outbox/charges/charge.hpp"

namespace charge_outbox::charge_api {

// From the configuration; pure values, copied freely.
struct RetryAfterTimes {
  // charge.lease: how long an owner holds a pending charge from the start of its latest acquirer call
  // (the intent, a takeover and every capture attempt set it to this from the database's now()).
  std::chrono::milliseconds lease{std::chrono::seconds{30}};
  // acquirer.request_timeout + acquirer.retry.backoff.budget: the longest an acquirer run can last from
  // the start of its latest call (the budget bounds when the last attempt may start).
  std::chrono::milliseconds longest_run{std::chrono::seconds{25}};
  // acquirer.retry.backoff.max: the longest this instance's own retries wait between two acquirer attempts.
  // A client's retry of a charge just given up on (the acquirer did not answer) is worth no sooner.
  std::chrono::milliseconds retry_pause{std::chrono::seconds{8}};
  // A pending charge only the reconciler moves on (past its deadline, a void on record): the chart's
  // reconciler schedule runs every minute, and such a charge is long past the grace period.
  std::chrono::seconds reconciler_run{60};
  // needs_review: only a person moves it on (charge-admin review resolve), on a person's time; an hour
  // between looks costs nothing and a busy poll learns nothing.
  std::chrono::seconds person{3600};
};

// What a 202's pending charge waits for, as the request that answers knows it.
enum class PendingWait {
  kRetry,       // this request gave its lease back: a retry with the same key takes it over at once
  kReconciler,  // this request gave its lease back, and only the reconciler can resolve it now
  kOurLease,    // this request still holds it (its release or result was not written): until its lease ends
  kAsRead,      // as read just now: held by whoever its lease names, or free
};

// Retry-After of a 409: when the owner's acquirer run should be over, from the start of its latest call
// (the lease's start: lease - lease_remaining ago) plus `longest_run`; once that is past, the lease's end,
// when a retry takes the charge over. At least 1 s, never past the lease's end.
std::chrono::seconds InFlightRetryAfter(std::chrono::milliseconds lease_remaining, const RetryAfterTimes& times);

// Retry-After of a 202 for `charge` (pending or needs_review; any other status gets 1 s, never used).
std::chrono::seconds PendingRetryAfter(const charges::Charge& charge, PendingWait wait, const RetryAfterTimes& times);

}  // namespace charge_outbox::charge_api
