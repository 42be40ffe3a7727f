#include "charge_service.hpp"

#include <spdlog/spdlog.h>

#include <optional>
#include <utility>

#include "charge_outbox/charges/settlement.hpp"
#include "charge_outbox/db/retry.hpp"
#include "charge_outbox/failpoints/failpoints.hpp"
#include "charge_outbox/log/log.hpp"
#include "charge_outbox/retry/retryability.hpp"

namespace charge_outbox::charge_api {
namespace {

namespace asio = boost::asio;
using charges::BeginOutcome;
using charges::ChargeStatus;

constexpr const char* kActor = "charge-api";

ApiError Unavailable(std::chrono::seconds retry_after, std::string detail) {
  return ApiError{ApiErrc::kDatabaseUnavailable, std::move(detail), "", retry_after, ""};
}

std::string OutcomeLabel(const charges::Charge& c) {
  switch (c.status) {
    case ChargeStatus::kCaptured: return "captured";
    case ChargeStatus::kFailed: return c.decline_code ? "declined" : "failed";
    case ChargeStatus::kPending: return "pending";
    case ChargeStatus::kCanceled: return "canceled";
    case ChargeStatus::kNeedsReview: return "needs_review";
  }
  return "unknown";
}

// One of the instance's places for charges working with the acquirer, held while Create runs.
class AcquirerRunSlot {
 public:
  static std::optional<AcquirerRunSlot> TryTake(std::atomic<std::size_t>& runs, std::size_t max) {
    if (runs.fetch_add(1) >= max) {
      runs.fetch_sub(1);
      return std::nullopt;
    }
    return AcquirerRunSlot(runs);
  }
  AcquirerRunSlot(AcquirerRunSlot&& other) noexcept : runs_(std::exchange(other.runs_, nullptr)) {}
  AcquirerRunSlot(const AcquirerRunSlot&) = delete;
  AcquirerRunSlot& operator=(const AcquirerRunSlot&) = delete;
  AcquirerRunSlot& operator=(AcquirerRunSlot&&) = delete;
  ~AcquirerRunSlot() {
    if (runs_ != nullptr) runs_->fetch_sub(1);
  }

 private:
  explicit AcquirerRunSlot(std::atomic<std::size_t>& runs) : runs_(&runs) {}
  std::atomic<std::size_t>* runs_;
};

}  // namespace

ChargeService::ChargeService(charges::ChargeStore& store, acquirer::AcquirerClient& acquirer,
                             const acquirer::RetryPolicy& policy, util::Clock& clock, ChargeApiProbe& probe,
                             LateRecords& late_records, ChargeServiceOptions options)
    : store_(store),
      acquirer_(acquirer),
      policy_(policy),
      clock_(clock),
      probe_(probe),
      late_records_(late_records),
      options_(std::move(options)) {
  const auto& backoff = policy_.options().backoff;
  retry_after_.lease = options_.lease;
  // The budget may be unbounded (milliseconds::max()): saturate rather than overflow.
  retry_after_.longest_run = backoff.budget > std::chrono::milliseconds::max() - options_.acquirer_request_timeout
                                 ? std::chrono::milliseconds::max()
                                 : backoff.budget + options_.acquirer_request_timeout;
  retry_after_.retry_pause = backoff.max;
}

asio::awaitable<http::Response> ChargeService::Create(CreateCharge cmd) {
  const auto traceparent = cmd.trace.ToTraceparent();
  charges::NewCharge n;
  n.merchant_id = cmd.merchant_id;
  n.idempotency_key = cmd.idempotency_key;
  n.fingerprint = RequestFingerprint(cmd.request);
  n.terms = cmd.request;
  n.traceparent = traceparent;
  // Unique per request, so a request recognises its own row when it must ask whether its insert committed.
  const charges::Lease lease{options_.instance_id + "/" + acquirer::NewRequestId(), options_.lease};
  // Attempt 1's request id is this request's, not the database's: should the intent's commit stay unknown,
  // it still names the attempt this request never sent (IntentNotWritten).
  const charges::FirstAttempt first{acquirer::NewRequestId(), acquirer::Operation::kCapture, kActor};

  if (draining_) co_return ToResponse(Unavailable(options_.unavailable_retry_after, "shutting down"));
  // A local queue is not an acquirer answer: with every place taken, say so before anything is written,
  // rather than write an intent that our own pool would then fail.
  const auto slot = AcquirerRunSlot::TryTake(acquirer_runs_, options_.max_acquirer_runs);
  if (!slot) {
    co_return ToResponse(ApiError{ApiErrc::kAcquirerBusy, "", "", options_.unavailable_retry_after, ""});
  }
  if (co_await failpoints::HitAsync("charge.before_intent_commit")) {
    co_return ToResponse(Unavailable(options_.unavailable_retry_after, "failpoint"));
  }
  auto begun = co_await store_.Begin(n, lease, first);
  bool in_doubt = false;
  if (!begun && begun.error().code == db::DbErrc::kInDoubt) {
    // The insert's commit is unknown: ask again with the same owner and request id, which inserts or finds
    // our own row. Once: a database that does not answer must be told to the client within its deadline,
    // and what this request cannot learn now is kept for the record (IntentNotWritten).
    in_doubt = true;
    log::WithTrace(cmd.trace.trace_id, spdlog::level::warn, "intent insert in doubt ({}); re-reading by key",
                   begun.error().detail);
    begun = co_await store_.Begin(n, lease, first);
  }
  const auto read_at = clock_.SteadyNow();
  if (!begun) co_return IntentNotWritten(begun.error(), in_doubt, lease, first, cmd.trace);

  const auto& charge = begun->charge;
  switch (begun->outcome) {
    case BeginOutcome::kFingerprintMismatch:
      co_return ToResponse(ApiError{ApiErrc::kIdempotencyKeyReused, "", "", {}, charge.public_id()});
    case BeginOutcome::kFinished:
      probe_.OnReplay();
      co_return AnswerFor(charge, true);
    case BeginOutcome::kInFlight: {
      probe_.OnInFlightConflict();
      const auto retry_after = InFlightRetryAfter(charge.lease_remaining, retry_after_);
      co_return ToResponse(ApiError{ApiErrc::kRequestInFlight, "", "", retry_after, charge.public_id()});
    }
    case BeginOutcome::kCreated:
      if (co_await failpoints::HitAsync("charge.after_intent_commit")) {
        co_return co_await GiveUp(charge, lease, std::nullopt, PendingWait::kRetry, cmd.trace);
      }
      co_return co_await Capture(charge, lease, charges::RunKind::kFirstCapture, begun->first_request_id, read_at,
                                 cmd.trace);
    case BeginOutcome::kTakenOver:
      log::WithTrace(cmd.trace.trace_id, spdlog::level::info,
                     "charge {} taken over from a gone owner; asking the acquirer first", charge.public_id());
      co_return co_await TakeOver(charge, lease, read_at, cmd.trace);
  }
  co_return ToResponse(ApiError{ApiErrc::kInternal, "unreachable"});
}

http::Response ChargeService::IntentNotWritten(const db::DbError& e, bool in_doubt, const charges::Lease& lease,
                                               const charges::FirstAttempt& first, const trace::TraceContext& trace) {
  log::ScopedTraceId scope(trace.trace_id);
  spdlog::error("intent not written{}: database {}: {}", in_doubt ? " (its commit unknown)" : "", db::ToString(e.code),
                e.detail);
  if (in_doubt) {
    // It may have committed, with attempt 1 on record as started. This request never sends it, and until
    // that is on record the attempt reads as "a capture may have left": the reconciler would then capture
    // a charge whose client was only told to retry.
    late_records_.Keep("the unconfirmed intent of attempt " + first.request_id,
                       [store = &store_, owner = lease.owner_id, request_id = first.request_id] {
                         return store->AbandonIntent(owner, request_id);
                       });
  }
  // Trouble that may pass is 503 with Retry-After; a refused statement is our bug, 500. Neither says
  // anything about the key's charge, which an earlier request (or this one, in doubt) may have made.
  switch (db::RetryabilityOf(e)) {
    case retry::Retryability::kTransient: return ToResponse(Unavailable(options_.unavailable_retry_after, e.detail));
    case retry::Retryability::kDefinitive:  // no database error is an answer
    case retry::Retryability::kNever: return ToResponse(ApiError{ApiErrc::kInternal, e.detail});
  }
  return ToResponse(ApiError{ApiErrc::kInternal, e.detail});
}

void ChargeService::Drain() {
  draining_ = true;
  policy_.StopRetrying();
}

asio::awaitable<http::Response> ChargeService::Capture(const charges::Charge& charge, const charges::Lease& lease,
                                                       charges::RunKind kind,
                                                       std::optional<std::string> recorded_first_request,
                                                       std::chrono::steady_clock::time_point read_at,
                                                       const trace::TraceContext& trace) {
  // Attempt 1 of the first run was recorded with the intent, under the request id sent on the wire. Every
  // other attempt is recorded only while this request owns the charge, before its deadline.
  charges::AttemptRecorder recorder(store_, charge.id, acquirer::Operation::kCapture, kActor, trace.trace_id,
                                    charges::Ownership{lease, options_.deadline},
                                    recorded_first_request ? std::optional(1) : std::nullopt);
  const acquirer::CaptureRequest request{charges::AcquirerIdempotencyKey(charge), charge.amount, charge.currency,
                                         charge.public_id(), charge.payment_method};
  const auto capture_call = [&](std::string request_id) -> asio::awaitable<acquirer::AttemptOutcome> {
    const auto started = std::chrono::steady_clock::now();
    auto outcome = co_await acquirer_.Capture(request, std::move(request_id));
    probe_.OnAcquirerCall(outcome, std::chrono::steady_clock::now() - started);
    co_return outcome;
  };
  const auto run = co_await charges::RunRecorded(policy_, clock_, recorder, capture_call, recorded_first_request);
  if (co_await failpoints::HitAsync("charge.after_acquirer_response")) {
    co_return co_await GiveUp(charge, lease, recorder.TakeLastFinish(), PendingWait::kRetry, trace);
  }
  if (const auto refusal = recorder.refusal()) {
    co_return co_await Refused(charge, lease, *refusal, recorder.TakeLastFinish(), trace);
  }
  const auto facts = charges::FactsOf(kind, run);
  if (facts.queued_out) co_return co_await GiveUpBusy(charge, lease, recorder.TakeLastFinish(), trace);
  auto charge_facts = charges::ChargeFacts{PastDeadline(charge, read_at), std::nullopt};
  if (facts.never_sent && kind == charges::RunKind::kFirstCapture) {
    charge_facts = co_await FactsAfterNeverSent(charge, recorder, charge_facts.past_deadline, trace);
  }
  const auto reading = charges::ReadRun(facts, charge_facts);
  switch (reading.finding) {
    case charges::Finding::kSettled:
      co_return co_await Settle(charge, lease, reading.transition, recorder, trace);
    case charges::Finding::kUnanswered:
    case charges::Finding::kNotVisible:
    case charges::Finding::kCaptureToVoid: break;
  }
  log::WithTrace(trace.trace_id, spdlog::level::info, "charge {} pending: acquirer outcome unknown ({}: {})",
                 charge.public_id(), acquirer::ToString(run.last().kind), reading.why);
  // Past the deadline a retry's takeover captures nothing: only the reconciler resolves it now.
  const auto wait = reading.finding == charges::Finding::kCaptureToVoid || charge_facts.past_deadline
                        ? PendingWait::kReconciler
                        : PendingWait::kRetry;
  co_return co_await GiveUp(charge, lease, recorder.TakeLastFinish(), wait, trace);
}

asio::awaitable<charges::ChargeFacts> ChargeService::FactsAfterNeverSent(const charges::Charge& charge,
                                                                         charges::AttemptRecorder& recorder,
                                                                         bool past_deadline,
                                                                         const trace::TraceContext& trace) {
  // With this run's own attempts finished on record as not_sent, any capture attempt on record that may
  // have left is someone else's (or an unwritten finish): then "nothing was captured" is not proven.
  charges::ChargeFacts facts{past_deadline, std::nullopt};
  if (!co_await recorder.FlushFinish()) co_return facts;
  const auto history_call = [&] { return store_.ReadAttemptHistory(charge.id); };
  const auto history = co_await db::WithDbRetries(history_call);
  if (!history) {
    log::WithTrace(trace.trace_id, spdlog::level::warn,
                   "charge {}: attempt history not read ({}); nothing concluded from attempts not sent",
                   charge.public_id(), history.error().detail);
    co_return facts;
  }
  facts.history = *history;
  co_return facts;
}

asio::awaitable<http::Response> ChargeService::TakeOver(const charges::Charge& charge, const charges::Lease& lease,
                                                        std::chrono::steady_clock::time_point read_at,
                                                        const trace::TraceContext& trace) {
  charges::AttemptRecorder recorder(store_, charge.id, acquirer::Operation::kLookup, kActor, trace.trace_id);
  const acquirer::LookupRequest lookup{charges::AcquirerIdempotencyKey(charge),
                                       acquirer::ExpectedCapture{charge.amount, charge.currency, charge.public_id()},
                                       charge.created_at};
  const auto lookup_call = [&](std::string request_id) -> asio::awaitable<acquirer::AttemptOutcome> {
    const auto started = std::chrono::steady_clock::now();
    auto outcome = co_await acquirer_.LookupByKey(lookup, std::move(request_id));
    probe_.OnAcquirerCall(outcome, std::chrono::steady_clock::now() - started);
    co_return outcome;
  };
  const auto run = co_await charges::RunRecorded(policy_, clock_, recorder, lookup_call);
  const auto facts = charges::FactsOf(charges::RunKind::kLookup, run);
  if (facts.queued_out) co_return co_await GiveUpBusy(charge, lease, recorder.TakeLastFinish(), trace);
  // The deadline as of the lookup's answer, not of its start: a lookup that took long may have crossed it.
  const bool past_deadline = PastDeadline(charge, read_at);
  const auto reading = charges::ReadRun(facts, charges::ChargeFacts{past_deadline, std::nullopt});
  const auto log_info = [&](std::string_view what) {
    log::WithTrace(trace.trace_id, spdlog::level::info, "charge {} {}", charge.public_id(), what);
  };
  switch (reading.finding) {
    case charges::Finding::kSettled:
      co_return co_await Settle(charge, lease, reading.transition, recorder, trace);
    case charges::Finding::kUnanswered:
      log_info("pending: the lookup got no answer (" + std::string(acquirer::ToString(run.last().kind)) + ")");
      co_return co_await GiveUp(charge, lease, recorder.TakeLastFinish(),
                                past_deadline ? PendingWait::kReconciler : PendingWait::kRetry, trace);
    case charges::Finding::kCaptureToVoid:
      log_info("captured at the acquirer but past its deadline: left to the reconciler, which voids it");
      co_return co_await GiveUp(charge, lease, recorder.TakeLastFinish(), PendingWait::kReconciler, trace);
    case charges::Finding::kNotVisible: break;
  }
  if (past_deadline) {
    log_info("not found at the acquirer and past its deadline: not captured now; left to the reconciler");
    co_return co_await GiveUp(charge, lease, recorder.TakeLastFinish(), PendingWait::kReconciler, trace);
  }
  if (draining_) {
    log_info("not found at the acquirer; not capturing while this instance shuts down");
    co_return co_await GiveUp(charge, lease, recorder.TakeLastFinish(), PendingWait::kRetry, trace);
  }
  // Not visible at the acquirer: capture with the same key. If an earlier capture is merely not visible
  // yet, the acquirer deduplicates by key and answers with it. Recording each capture attempt renews the
  // lease, so the capture has a whole lease of its own as the lookup had, and is refused (nothing sent)
  // once this request no longer owns the charge or the deadline has passed by the database's clock.
  co_await recorder.FlushFinish();
  co_return co_await Capture(charge, lease, charges::RunKind::kCapture, std::nullopt, read_at, trace);
}

asio::awaitable<http::Response> ChargeService::Refused(const charges::Charge& charge, const charges::Lease& lease,
                                                       charges::Refusal refusal,
                                                       std::optional<charges::AttemptFinish> last,
                                                       const trace::TraceContext& trace) {
  switch (refusal) {
    case charges::Refusal::kNotOwner: {
      log::WithTrace(trace.trace_id, spdlog::level::info,
                     "charge {} is no longer this request's (its lease ran out and another actor holds or resolved "
                     "it): nothing more sent",
                     charge.public_id());
      if (last) co_await store_.Release(charge.id, lease.owner_id, last);  // its finish; the lease is another's
      co_return co_await AnswerAsItIsNow(charge);
    }
    case charges::Refusal::kPastDeadline:
    case charges::Refusal::kVoidOnRecord:
      log::WithTrace(trace.trace_id, spdlog::level::info, "charge {}: not captured ({}); left to the reconciler",
                     charge.public_id(), charges::ToString(refusal));
      co_return co_await GiveUp(charge, lease, std::move(last), PendingWait::kReconciler, trace);
  }
  co_return co_await GiveUp(charge, lease, std::move(last), PendingWait::kReconciler, trace);
}

asio::awaitable<http::Response> ChargeService::Settle(const charges::Charge& charge, const charges::Lease& lease,
                                                      charges::Transition transition,
                                                      charges::AttemptRecorder& recorder,
                                                      const trace::TraceContext& trace) {
  transition.owner_id = lease.owner_id;
  transition.traceparent = trace.ToTraceparent();
  transition.deadline = options_.deadline;
  charges::Charge after = charge;
  after.status = transition.to;
  if (transition.acquirer_capture_id) after.acquirer_capture_id = transition.acquirer_capture_id;
  after.decline_code = transition.decline_code;
  after.failure_reason = transition.failure_reason;
  // The statement writes its own time here (charges::kDatabaseTimeMark); the answer is what it stored.
  after.updated_at = charges::Timestamp{};
  const auto response = ResponseFor(after);
  transition.response_status = response.status;
  transition.response_body = response.body;

  const auto last_attempt = recorder.TakeLastFinish();
  const auto settled = co_await charges::Settle(store_, charge, transition, last_attempt);
  log::ScopedTraceId scope(trace.trace_id);  // no co_await below
  if (!settled) {
    // The acquirer's answer is known but not recorded. The charge stays pending under our lease; when
    // it expires a retry (or the reconciler) asks the acquirer by key and records the same truth.
    spdlog::error("charge {} outcome {} not recorded: {}", charge.public_id(), charges::ToString(transition.to),
                  settled.error().detail);
    probe_.OnChargeOutcome("pending");
    co_return ToHttp(ResponseFor(charge), charge.public_id(), false,
                     PendingRetryAfter(charge, PendingWait::kOurLease, retry_after_));
  }
  const auto& now = settled->charge;
  switch (settled->outcome) {
    case charges::SettleOutcome::kApplied:
      probe_.OnChargeOutcome(OutcomeLabel(now));
      co_return AnswerFor(now, false);  // the response as stored, with the database's time
    case charges::SettleOutcome::kLost:
      // Someone else resolved it first (or, for an inference, holds it now): answer with what stands.
      spdlog::info("charge {}: {} not applied; it is {}", charge.public_id(), charges::ToString(transition.to),
                   charges::ToString(now.status));
      probe_.OnChargeOutcome(OutcomeLabel(now));
      co_return AnswerFor(now, false);
    case charges::SettleOutcome::kFlagged:
      probe_.OnChargeOutcome(OutcomeLabel(now));
      co_return AnswerFor(now, false);
    case charges::SettleOutcome::kUnflagged: {
      // We hold the acquirer's proof against the recorded state, and the flag did not land: the record's
      // state (its stored answer above all) is exactly what must not be repeated. Under review is the truth.
      probe_.OnUnflaggedContradiction();
      probe_.OnChargeOutcome("needs_review");
      const auto under_review = charges::UnderReview(now, *settled->contradiction);
      co_return ToHttp(ResponseFor(under_review), now.public_id(), false,
                       PendingRetryAfter(under_review, PendingWait::kAsRead, retry_after_));
    }
    case charges::SettleOutcome::kRefused:
      // The statement finished the attempt even though it refused the transition.
      co_return co_await Refused(charge, lease, *settled->refusal, std::nullopt, trace);
  }
  co_return AnswerFor(now, false);
}

asio::awaitable<http::Response> ChargeService::GiveUp(const charges::Charge& charge, const charges::Lease& lease,
                                                      std::optional<charges::AttemptFinish> last_attempt,
                                                      PendingWait wait, const trace::TraceContext& trace) {
  // The outcome stays unknown: the charge stays pending and its lease is given up, so the client's retry
  // takes it over at once (asking the acquirer by key) instead of waiting for the lease to run out.
  const auto released = co_await store_.Release(charge.id, lease.owner_id, last_attempt);
  if (!released) {
    wait = PendingWait::kOurLease;  // a retry meets this request's lease (409) until it runs out
    log::WithTrace(trace.trace_id, spdlog::level::warn, "lease of charge {} not released: {}", charge.public_id(),
                   released.error().detail);
    // What the run proved about its last attempt must still reach the record: above all that it never
    // left (a run answered 503 acquirer-busy), without which it reads as "a capture may have left".
    if (last_attempt) {
      late_records_.Keep("the release of charge " + charge.public_id(),
                         [store = &store_, id = charge.id, owner = lease.owner_id, finish = last_attempt] {
                           return store->Release(id, owner, finish);
                         });
    }
  }
  probe_.OnChargeOutcome("pending");
  co_return ToHttp(ResponseFor(charge), charge.public_id(), false, PendingRetryAfter(charge, wait, retry_after_));
}

asio::awaitable<http::Response> ChargeService::GiveUpBusy(const charges::Charge& charge,
                                                          const charges::Lease& lease,
                                                          std::optional<charges::AttemptFinish> last_attempt,
                                                          const trace::TraceContext& trace) {
  log::WithTrace(trace.trace_id, spdlog::level::warn,
                 "charge {} pending: not sent, every acquirer connection of this instance was busy",
                 charge.public_id());
  co_await GiveUp(charge, lease, std::move(last_attempt), PendingWait::kRetry, trace);
  co_return ToResponse(ApiError{ApiErrc::kAcquirerBusy, "", "", options_.unavailable_retry_after, charge.public_id()});
}

http::Response ChargeService::AnswerFor(const charges::Charge& charge, bool replayed, PendingWait wait) {
  const auto retry_after = PendingRetryAfter(charge, wait, retry_after_);
  if (charge.response_status && charge.response_body) {
    return ToHttp({*charge.response_status, *charge.response_body}, charge.public_id(), replayed, retry_after);
  }
  // Resolved without a stored answer (by the reconciler), or flagged for review since: what its state
  // calls for now, the same as GET shows.
  return ToHttp(ResponseFor(charge), charge.public_id(), replayed, retry_after);
}

asio::awaitable<http::Response> ChargeService::AnswerAsItIsNow(const charges::Charge& fallback) {
  const auto now = co_await store_.FindById(fallback.merchant_id, fallback.id);
  const auto& answered = now && *now ? **now : fallback;
  probe_.OnChargeOutcome(OutcomeLabel(answered));
  co_return AnswerFor(answered, false);
}

bool ChargeService::PastDeadline(const charges::Charge& charge, std::chrono::steady_clock::time_point read_at) {
  return charges::PastDeadline(charge, options_.deadline, clock_.SteadyNow() - read_at);
}

asio::awaitable<http::Response> ChargeService::Get(const std::string& merchant_id, const std::string& public_id) {
  const auto uuid = charges::UuidFromPublicId(public_id);
  // Not echoed: the path's bytes, percent-decoded, need not be UTF-8, and a JSON body must be.
  if (!uuid) co_return ToResponse(ApiError{ApiErrc::kNotFound, "Not a charge id (ch_ and 32 hex digits)."});
  const auto found = co_await store_.FindById(merchant_id, *uuid);
  if (!found) co_return ToResponse(Unavailable(options_.unavailable_retry_after, found.error().detail));
  if (!*found) co_return ToResponse(ApiError{ApiErrc::kNotFound, "No charge " + public_id + "."});
  co_return http::JsonResponse(http::Status::ok, ChargeJson(**found));
}

asio::awaitable<http::Response> ChargeService::GetByKey(const std::string& merchant_id,
                                                        const std::string& idempotency_key) {
  const auto found = co_await store_.FindByKey(merchant_id, idempotency_key);
  if (!found) co_return ToResponse(Unavailable(options_.unavailable_retry_after, found.error().detail));
  if (!*found) co_return ToResponse(ApiError{ApiErrc::kNotFound, "No charge with that Idempotency-Key."});
  co_return http::JsonResponse(http::Status::ok, ChargeJson(**found));
}

}  // namespace charge_outbox::charge_api
