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
                             ChargeServiceOptions options)
    : store_(store), acquirer_(acquirer), policy_(policy), clock_(clock), probe_(probe), options_(std::move(options)) {}

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
  const charges::FirstAttempt first{acquirer::Operation::kCapture, kActor, clock_.WallNow()};

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
  if (!begun && begun.error().code == db::DbErrc::kInDoubt) {
    // The insert's commit is unknown: ask again with the same owner; it inserts or finds our own row.
    log::WithTrace(cmd.trace.trace_id, spdlog::level::warn, "intent insert in doubt ({}); re-reading by key",
                   begun.error().detail);
    begun = co_await store_.Begin(n, lease, first);
  }
  if (!begun) {
    const auto& e = begun.error();
    log::ScopedTraceId scope(cmd.trace.trace_id);
    spdlog::error("intent not written: database {}: {}", db::ToString(e.code), e.detail);
    // Trouble that may pass is 503 with Retry-After; a refused statement is our bug, 500.
    switch (db::RetryabilityOf(e)) {
      case retry::Retryability::kTransient:
        co_return ToResponse(Unavailable(options_.unavailable_retry_after, e.detail));
      case retry::Retryability::kDefinitive:  // no database error is an answer
      case retry::Retryability::kNever: co_return ToResponse(ApiError{ApiErrc::kInternal, e.detail});
    }
  }

  const auto& charge = begun->charge;
  switch (begun->outcome) {
    case BeginOutcome::kFingerprintMismatch:
      co_return ToResponse(ApiError{ApiErrc::kIdempotencyKeyReused, "", "", {}, charge.public_id()});
    case BeginOutcome::kFinished:
      probe_.OnReplay();
      co_return AnswerFor(charge, true);
    case BeginOutcome::kInFlight: {
      probe_.OnInFlightConflict();
      const auto retry_after = std::chrono::ceil<std::chrono::seconds>(charge.lease_remaining);
      co_return ToResponse(ApiError{ApiErrc::kRequestInFlight, "", "", retry_after, charge.public_id()});
    }
    case BeginOutcome::kCreated:
      if (co_await failpoints::HitAsync("charge.after_intent_commit")) {
        co_return co_await GiveUp(charge, lease, std::nullopt, cmd.trace);
      }
      co_return co_await Capture(charge, lease, charges::RunKind::kFirstCapture, begun->first_request_id, cmd.trace);
    case BeginOutcome::kTakenOver:
      log::WithTrace(cmd.trace.trace_id, spdlog::level::info,
                     "charge {} taken over from a gone owner; asking the acquirer first", charge.public_id());
      co_return co_await TakeOver(charge, lease, cmd.trace);
  }
  co_return ToResponse(ApiError{ApiErrc::kInternal, "unreachable"});
}

void ChargeService::Drain() {
  draining_ = true;
  policy_.StopRetrying();
}

asio::awaitable<http::Response> ChargeService::Capture(const charges::Charge& charge, const charges::Lease& lease,
                                                       charges::RunKind kind,
                                                       std::optional<std::string> recorded_first_request,
                                                       const trace::TraceContext& trace) {
  // Attempt 1 of the first run was recorded with the intent, under the request id sent on the wire.
  charges::AttemptRecorder recorder(store_, charge.id, acquirer::Operation::kCapture, kActor, trace.trace_id,
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
    co_return co_await GiveUp(charge, lease, recorder.TakeLastFinish(), trace);
  }
  const auto facts = charges::FactsOf(kind, run);
  if (facts.queued_out) co_return co_await GiveUpBusy(charge, lease, recorder.TakeLastFinish(), trace);
  auto charge_facts = charges::ChargeFacts{PastDeadline(charge), std::nullopt};
  if (facts.never_sent && kind == charges::RunKind::kFirstCapture) {
    charge_facts = co_await FactsAfterNeverSent(charge, recorder, trace);
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
  co_return co_await GiveUp(charge, lease, recorder.TakeLastFinish(), trace);
}

asio::awaitable<charges::ChargeFacts> ChargeService::FactsAfterNeverSent(const charges::Charge& charge,
                                                                         charges::AttemptRecorder& recorder,
                                                                         const trace::TraceContext& trace) {
  // With this run's own attempts finished on record as not_sent, any capture attempt on record that may
  // have left is someone else's (or an unwritten finish): then "nothing was captured" is not proven.
  charges::ChargeFacts facts{PastDeadline(charge), std::nullopt};
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
                                                        const trace::TraceContext& trace) {
  const bool past_deadline = PastDeadline(charge);
  charges::AttemptRecorder recorder(store_, charge.id, acquirer::Operation::kLookup, kActor, trace.trace_id);
  const acquirer::LookupRequest lookup{charges::AcquirerIdempotencyKey(charge),
                                       acquirer::ExpectedCapture{charge.amount, charge.currency, charge.public_id()}};
  const auto lookup_call = [&](std::string request_id) -> asio::awaitable<acquirer::AttemptOutcome> {
    const auto started = std::chrono::steady_clock::now();
    auto outcome = co_await acquirer_.LookupByKey(lookup, std::move(request_id));
    probe_.OnAcquirerCall(outcome, std::chrono::steady_clock::now() - started);
    co_return outcome;
  };
  const auto run = co_await charges::RunRecorded(policy_, clock_, recorder, lookup_call);
  const auto facts = charges::FactsOf(charges::RunKind::kLookup, run);
  if (facts.queued_out) co_return co_await GiveUpBusy(charge, lease, recorder.TakeLastFinish(), trace);
  const auto reading = charges::ReadRun(facts, charges::ChargeFacts{past_deadline, std::nullopt});
  const auto log_info = [&](std::string_view what) {
    log::WithTrace(trace.trace_id, spdlog::level::info, "charge {} {}", charge.public_id(), what);
  };
  switch (reading.finding) {
    case charges::Finding::kSettled:
      co_return co_await Settle(charge, lease, reading.transition, recorder, trace);
    case charges::Finding::kUnanswered:
      log_info("pending: the lookup got no answer (" + std::string(acquirer::ToString(run.last().kind)) + ")");
      co_return co_await GiveUp(charge, lease, recorder.TakeLastFinish(), trace);
    case charges::Finding::kCaptureToVoid:
      log_info("captured at the acquirer but past its deadline: left to the reconciler, which voids it");
      co_return co_await GiveUp(charge, lease, recorder.TakeLastFinish(), trace);
    case charges::Finding::kNotVisible: break;
  }
  if (past_deadline) {
    log_info("not found at the acquirer and past its deadline: not captured now; left to the reconciler");
    co_return co_await GiveUp(charge, lease, recorder.TakeLastFinish(), trace);
  }
  if (draining_) {
    log_info("not found at the acquirer; not capturing while this instance shuts down");
    co_return co_await GiveUp(charge, lease, recorder.TakeLastFinish(), trace);
  }
  // Not visible at the acquirer: capture with the same key. If an earlier capture is merely not visible
  // yet, the acquirer deduplicates by key and answers with it. The lease is renewed first, so the capture
  // has a whole lease of its own, as the lookup had.
  co_await recorder.FlushFinish();
  const auto renew_call = [&] { return store_.RenewLease(charge.id, lease.owner_id, lease.duration); };
  const auto renewed = co_await db::WithDbRetries(renew_call);
  if (!renewed) {
    log_info("pending: lease not renewed (" + renewed.error().detail + "); not capturing");
    co_return co_await GiveUp(charge, lease, std::nullopt, trace);
  }
  if (!*renewed) {
    log_info("is no longer this request's (resolved or taken over); not capturing");
    const auto now = co_await store_.FindById(charge.merchant_id, charge.id);
    co_return now && *now ? AnswerFor(**now, false) : ToHttp(ResponseFor(charge), charge.public_id(), false);
  }
  co_return co_await Capture(charge, lease, charges::RunKind::kCapture, std::nullopt, trace);
}

asio::awaitable<http::Response> ChargeService::Settle(const charges::Charge& charge, const charges::Lease& lease,
                                                      charges::Transition transition,
                                                      charges::AttemptRecorder& recorder,
                                                      const trace::TraceContext& trace) {
  transition.owner_id = lease.owner_id;
  transition.traceparent = trace.ToTraceparent();
  charges::Charge after = charge;
  after.status = transition.to;
  if (transition.acquirer_capture_id) after.acquirer_capture_id = transition.acquirer_capture_id;
  after.decline_code = transition.decline_code;
  after.failure_reason = transition.failure_reason;
  after.updated_at = std::chrono::time_point_cast<std::chrono::milliseconds>(clock_.WallNow());
  transition.at = after.updated_at;
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
    co_return ToHttp(ResponseFor(charge), charge.public_id(), false);
  }
  const auto& now = settled->charge;
  probe_.OnChargeOutcome(OutcomeLabel(now));
  switch (settled->outcome) {
    case charges::SettleOutcome::kApplied: co_return ToHttp(response, now.public_id(), false);
    case charges::SettleOutcome::kLost:
      // Someone else resolved it first (or, for an inference, holds it now): answer with what stands.
      spdlog::info("charge {}: {} not applied; it is {}", charge.public_id(), charges::ToString(transition.to),
                   charges::ToString(now.status));
      co_return AnswerFor(now, false);
    case charges::SettleOutcome::kFlagged: co_return AnswerFor(now, false);
  }
  co_return AnswerFor(now, false);
}

asio::awaitable<http::Response> ChargeService::GiveUp(const charges::Charge& charge, const charges::Lease& lease,
                                                      std::optional<charges::AttemptFinish> last_attempt,
                                                      const trace::TraceContext& trace) {
  // The outcome stays unknown: the charge stays pending and its lease is given up, so the client's retry
  // takes it over at once (asking the acquirer by key) instead of waiting for the lease to run out.
  const auto released = co_await store_.Release(charge.id, lease.owner_id, last_attempt);
  if (!released) {
    log::WithTrace(trace.trace_id, spdlog::level::warn, "lease of charge {} not released: {}", charge.public_id(),
                   released.error().detail);
  }
  probe_.OnChargeOutcome("pending");
  co_return ToHttp(ResponseFor(charge), charge.public_id(), false);
}

asio::awaitable<http::Response> ChargeService::GiveUpBusy(const charges::Charge& charge,
                                                          const charges::Lease& lease,
                                                          std::optional<charges::AttemptFinish> last_attempt,
                                                          const trace::TraceContext& trace) {
  log::WithTrace(trace.trace_id, spdlog::level::warn,
                 "charge {} pending: not sent, every acquirer connection of this instance was busy",
                 charge.public_id());
  co_await GiveUp(charge, lease, std::move(last_attempt), trace);
  co_return ToResponse(ApiError{ApiErrc::kAcquirerBusy, "", "", options_.unavailable_retry_after, charge.public_id()});
}

http::Response ChargeService::AnswerFor(const charges::Charge& charge, bool replayed) {
  if (charge.response_status && charge.response_body) {
    return ToHttp({*charge.response_status, *charge.response_body}, charge.public_id(), replayed);
  }
  // Resolved without a stored answer (by the reconciler), or flagged for review since: what its state
  // calls for now, the same as GET shows.
  return ToHttp(ResponseFor(charge), charge.public_id(), replayed);
}

bool ChargeService::PastDeadline(const charges::Charge& charge) {
  return clock_.WallNow() - charge.created_at >= options_.deadline;
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
