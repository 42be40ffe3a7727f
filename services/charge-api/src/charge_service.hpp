// ChargeService: the flow of docs/charge-api.md (intent before effect) behind POST /v1/charges, and the
// two reads.
//
//   1. Intent: the charge `pending`, its `initiated` event and attempt 1, in one statement. The
//      per-merchant unique key decides who is first.
//   2. Effect: capture at the acquirer with the charge's idempotency key, under the retry policy, every
//      attempt on record before it is sent (an attempt that cannot be recorded is not sent).
//   3. Result: what the evidence settles (charges::ReadRun, the reading the reconciler uses too), applied
//      through charges::Settle: the conditional transition and its event in one statement, the response
//      stored for replay. An unknown outcome leaves the charge `pending` (202) and gives up the lease.
//
// A repeat finds the key: other parameters 422; finished: the stored response replayed; a live owner
// 409; an owner gone (crashed, or answered 202): take over and ask the acquirer by key before anything.
// A takeover never concludes "nothing was captured" (an earlier owner may have captured), and past the
// charge's deadline never captures at all. Every capture attempt is recorded only while this request still
// owns the charge (which renews its lease) and before the deadline: a request that lost its charge to
// another actor sends nothing more. What the service could not record before it answered 503 (an intent
// whose commit it never learned, attempts that never left) is kept by LateRecords until it is on record.
//
// Thread safety: Create/Get may run concurrently from any number of coroutines; the service holds no
// mutable state of its own.
#pragma once

#include <boost/asio/awaitable.hpp>

#include <atomic>
#include <chrono>
#include <limits>
#include <string>

#include "api_responses.hpp"
#include "charge_api_probe.hpp"
#include "charge_outbox/acquirer/acquirer_client.hpp"
#include "charge_outbox/charges/attempt_recorder.hpp"
#include "charge_outbox/charges/charge_store.hpp"
#include "charge_outbox/charges/evidence.hpp"
#include "charge_outbox/http/server.hpp"
#include "charge_outbox/trace/trace_context.hpp"
#include "charge_request.hpp"
#include "late_records.hpp"
#include "retry_after.hpp"

namespace charge_outbox::charge_api {

struct ChargeServiceOptions {
  std::string instance_id;
  // How long a request owns its pending charge. It must outlast the request's own work (the acquirer
  // retry budget plus one call timeout), so that a live owner is never taken over; a dead owner blocks
  // retries (409) for at most this long.
  std::chrono::milliseconds lease{std::chrono::seconds{30}};
  // From a charge's creation: past it, a takeover no longer captures (the reconciler voids or escalates).
  // The same value as the reconciler's `reconciler.deadline`.
  std::chrono::milliseconds deadline{std::chrono::hours{1}};
  std::chrono::seconds unavailable_retry_after{1};
  // acquirer.request_timeout: with the retry policy's budget, how long an owner's acquirer run can last
  // (the 409's Retry-After, retry_after.hpp).
  std::chrono::milliseconds acquirer_request_timeout{std::chrono::seconds{10}};
  // Charges that may be working with the acquirer at once (its pool's connections plus the queue behind
  // them). One more is answered 503 before its intent is written: nothing stored, nothing sent.
  std::size_t max_acquirer_runs = std::numeric_limits<std::size_t>::max();
};

struct CreateCharge {
  std::string merchant_id;
  std::string idempotency_key;
  ChargeRequest request;
  trace::TraceContext trace;  // this request's span
};

class ChargeService {
 public:
  ChargeService(charges::ChargeStore& store, acquirer::AcquirerClient& acquirer, const acquirer::RetryPolicy& policy,
                util::Clock& clock, ChargeApiProbe& probe, LateRecords& late_records, ChargeServiceOptions options);

  boost::asio::awaitable<http::Response> Create(CreateCharge command);
  // Shutting down: a new charge is answered 503 before its intent, a charge at work stops retrying
  // after its attempt in flight, and a takeover does not start a capture; each gives its lease back
  // with the charge pending. Thread-safe, never undone.
  void Drain();
  boost::asio::awaitable<http::Response> Get(const std::string& merchant_id, const std::string& public_id);
  boost::asio::awaitable<http::Response> GetByKey(const std::string& merchant_id, const std::string& idempotency_key);

 private:
  // `read_at`: when `charge` was read (the monotonic clock), from which its deadline is judged.
  boost::asio::awaitable<http::Response> Capture(const charges::Charge& charge, const charges::Lease& lease,
                                                 charges::RunKind kind, std::optional<std::string> recorded_first_request,
                                                 std::chrono::steady_clock::time_point read_at,
                                                 const trace::TraceContext& trace);
  boost::asio::awaitable<http::Response> TakeOver(const charges::Charge& charge, const charges::Lease& lease,
                                                  std::chrono::steady_clock::time_point read_at,
                                                  const trace::TraceContext& trace);
  // The intent could not be written, or its commit stayed unknown: 503, and if it may have committed, its
  // first attempt (never sent) kept for the record.
  http::Response IntentNotWritten(const db::DbError& error, bool in_doubt, const charges::Lease& lease,
                                  const charges::FirstAttempt& first, const trace::TraceContext& trace);
  // A run the store refused to record (the request lost its charge, the deadline passed, a void is on
  // record): nothing more was sent; answers with what the charge is now.
  boost::asio::awaitable<http::Response> Refused(const charges::Charge& charge, const charges::Lease& lease,
                                                 charges::Refusal refusal, std::optional<charges::AttemptFinish> last,
                                                 const trace::TraceContext& trace);
  // What a capture run that never left the process may conclude, given the attempts on record.
  boost::asio::awaitable<charges::ChargeFacts> FactsAfterNeverSent(const charges::Charge& charge,
                                                                   charges::AttemptRecorder& recorder,
                                                                   bool past_deadline,
                                                                   const trace::TraceContext& trace);
  boost::asio::awaitable<http::Response> Settle(const charges::Charge& charge, const charges::Lease& lease,
                                                charges::Transition transition, charges::AttemptRecorder& recorder,
                                                const trace::TraceContext& trace);
  // `trace`, here and in every function that takes one: the request's, which each log line about its
  // charge carries (log::WithTrace, scoped to the line: a coroutine may resume on another thread).
  // `wait`: kRetry or kReconciler, what the released charge waits for (its 202's Retry-After).
  boost::asio::awaitable<http::Response> GiveUp(const charges::Charge& charge, const charges::Lease& lease,
                                                std::optional<charges::AttemptFinish> last_attempt,
                                                PendingWait wait, const trace::TraceContext& trace);
  // Like GiveUp, but the run never left this process because our own acquirer pool was full: a 503 the
  // client retries with the same key (the retry takes the released charge over at once).
  boost::asio::awaitable<http::Response> GiveUpBusy(const charges::Charge& charge, const charges::Lease& lease,
                                                    std::optional<charges::AttemptFinish> last_attempt,
                                                    const trace::TraceContext& trace);
  // The answer a charge's current state calls for: its stored response, or the one its state implies; a
  // 202 with the Retry-After of `wait`.
  http::Response AnswerFor(const charges::Charge& charge, bool replayed, PendingWait wait = PendingWait::kAsRead);
  // What the charge is now, read afresh; `fallback` when it cannot be read.
  boost::asio::awaitable<http::Response> AnswerAsItIsNow(const charges::Charge& fallback);
  bool PastDeadline(const charges::Charge& charge, std::chrono::steady_clock::time_point read_at);

  charges::ChargeStore& store_;
  acquirer::AcquirerClient& acquirer_;
  const acquirer::RetryPolicy& policy_;
  util::Clock& clock_;
  ChargeApiProbe& probe_;
  LateRecords& late_records_;
  ChargeServiceOptions options_;
  RetryAfterTimes retry_after_;
  std::atomic<std::size_t> acquirer_runs_{0};
  std::atomic<bool> draining_{false};
};

}  // namespace charge_outbox::charge_api
