#include "charge_service.hpp"

#include <spdlog/spdlog.h>

#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>


#include "charge_outbox/failpoints/failpoints.hpp"
#include "charge_outbox/log/log.hpp"

namespace charge_outbox::charge_api {
namespace {

namespace asio = boost::asio;
using acquirer::EvidenceClass;
using acquirer::OutcomeKind;
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

}  // namespace

std::optional<charges::Transition> DecideTransition(const acquirer::RetryRun& run) {
  const auto& last = run.last();
  charges::Transition t;
  switch (last.kind) {
    case OutcomeKind::kCaptured:
      t.to = ChargeStatus::kCaptured;
      t.acquirer_capture_id = last.capture ? std::optional(last.capture->id) : std::nullopt;
      return t;
    case OutcomeKind::kDeclined:
      t.to = ChargeStatus::kFailed;
      t.decline_code = last.decline_code.value_or("declined");
      return t;
    case OutcomeKind::kMismatch:
      // The acquirer holds a capture under our key that is not what we asked for: a human decides.
      t.to = ChargeStatus::kNeedsReview;
      t.failure_reason = "acquirer_capture_mismatch";
      t.acquirer_capture_id = last.capture ? std::optional(last.capture->id) : std::nullopt;
      return t;
    case OutcomeKind::kContractError:
      // The acquirer refused the request itself (credentials, format, key reused with another body).
      // Whether an earlier attempt of this run captured is not proven either way: a human decides.
      t.to = ChargeStatus::kNeedsReview;
      t.failure_reason = "acquirer_rejected_request";
      return t;
    case OutcomeKind::kNotSent:
    case OutcomeKind::kTimedOut:
    case OutcomeKind::kConnectionDropped:
    case OutcomeKind::kServerError:
    case OutcomeKind::kUnavailable:
    case OutcomeKind::kThrottled:
    case OutcomeKind::kInFlight:
    case OutcomeKind::kUntrustedResponse:
    case OutcomeKind::kNotFound:
    case OutcomeKind::kVoided:
    case OutcomeKind::kPage:
      // Only a run in which no attempt ever left the process proves nothing was captured.
      if (run.evidence() == EvidenceClass::kNotSent) {
        t.to = ChargeStatus::kFailed;
        t.failure_reason = "acquirer_unreachable";
        return t;
      }
      return std::nullopt;
  }
  return std::nullopt;
}

// Records each acquirer attempt in acquirer_attempts as it happens: started before a byte is sent (so a
// crash mid-call leaves it on record), finished when it ends. The last attempt's finish is handed to the
// statement that completes or releases the charge, saving a round trip on the common path.
class ChargeService::AttemptRecorder final : public acquirer::AttemptObserver {
 public:
  AttemptRecorder(charges::ChargeStore& store, ChargeApiProbe& probe, std::string charge_id,
                  acquirer::Operation operation, bool first_recorded_with_intent)
      : store_(store),
        probe_(probe),
        charge_id_(std::move(charge_id)),
        operation_(operation),
        first_recorded_(first_recorded_with_intent) {}

  asio::awaitable<void> OnAttemptStarted(const acquirer::AttemptContext& attempt,
                                         std::chrono::system_clock::time_point started_at) override {
    co_await FlushFinish();
    started_ = std::chrono::steady_clock::now();
    if (attempt.attempt_no == 1 && first_recorded_) {
      current_ = 1;
      co_return;
    }
    // Named, not a braced temporary in the co_await expression: GCC 12 destroys such temporaries twice.
    const charges::AttemptStart start{attempt.request_id, operation_, kActor, started_at};
    const auto r = co_await store_.StartAttempt(charge_id_, start);
    current_ = r ? *r : 0;
    if (!r) spdlog::warn("attempt of charge {} not recorded: {}", charge_id_, r.error().detail);
  }

  asio::awaitable<void> OnAttemptFinished(const acquirer::AttemptRecord& record) override {
    probe_.OnAcquirerCall(record.outcome, std::chrono::steady_clock::now() - started_);
    if (current_ > 0) {
      pending_ = charges::AttemptFinish{current_, record.finished_at, record.outcome.kind, record.outcome.evidence(),
                                        record.outcome.http_status};
    }
    co_return;
  }

  // Writes the finish of the previous attempt (only between attempts of a retried run).
  asio::awaitable<void> FlushFinish() {
    if (!pending_) co_return;
    const auto finish = *std::exchange(pending_, std::nullopt);
    const auto r = co_await store_.FinishAttempt(charge_id_, finish);
    if (!r) spdlog::warn("attempt {} of charge {} not finished on record: {}", finish.attempt_no, charge_id_,
                         r.error().detail);
  }

  std::optional<charges::AttemptFinish> TakeLastFinish() { return std::exchange(pending_, std::nullopt); }

 private:
  charges::ChargeStore& store_;
  ChargeApiProbe& probe_;
  std::string charge_id_;
  acquirer::Operation operation_;
  bool first_recorded_;
  int current_ = 0;
  std::chrono::steady_clock::time_point started_{};
  std::optional<charges::AttemptFinish> pending_;
};

ChargeService::ChargeService(charges::ChargeStore& store, acquirer::AcquirerClient& acquirer,
                             const acquirer::RetryPolicy& policy, acquirer::RetryClock& clock, ChargeApiProbe& probe,
                             ChargeServiceOptions options)
    : store_(store), acquirer_(acquirer), policy_(policy), clock_(clock), probe_(probe), options_(std::move(options)) {}

asio::awaitable<http::Response> ChargeService::Create(CreateCharge cmd) {
  const auto traceparent = cmd.trace.ToTraceparent();
  charges::NewCharge n;
  n.merchant_id = cmd.merchant_id;
  n.idempotency_key = cmd.idempotency_key;
  n.fingerprint = RequestFingerprint(cmd.request);
  n.order_id = cmd.request.order_id;
  n.amount = cmd.request.amount;
  n.currency = cmd.request.currency;
  n.payment_method = cmd.request.payment_method;
  n.description = cmd.request.description;
  n.traceparent = traceparent;
  // Unique per request, so a request recognises its own row when it must ask whether its insert committed.
  const charges::Lease lease{options_.instance_id + "/" + acquirer::NewRequestId(), options_.lease};
  const charges::FirstAttempt first{acquirer::Operation::kCapture, kActor, clock_.WallNow()};

  if (co_await failpoints::HitAsync("charge.before_intent_commit")) {
    co_return ToResponse(Unavailable(options_.unavailable_retry_after, "failpoint"));
  }
  auto begun = co_await store_.Begin(n, lease, first);
  if (!begun && begun.error().code == db::DbErrc::kInDoubt) {
    // The insert's commit is unknown: ask again with the same owner; it inserts or finds our own row.
    {
      log::ScopedTraceId scope(cmd.trace.trace_id);
      spdlog::warn("intent insert in doubt ({}); re-reading by key", begun.error().detail);
    }
    begun = co_await store_.Begin(n, lease, first);
  }
  if (!begun) {
    const auto& e = begun.error();
    log::ScopedTraceId scope(cmd.trace.trace_id);
    spdlog::error("intent not written: database {}: {}", db::ToString(e.code), e.detail);
    switch (e.code) {
      case db::DbErrc::kUnavailable:
      case db::DbErrc::kOverloaded:
      case db::DbErrc::kInDoubt: co_return ToResponse(Unavailable(options_.unavailable_retry_after, e.detail));
      case db::DbErrc::kFailed: co_return ToResponse(ApiError{ApiErrc::kInternal, e.detail});
    }
  }

  const auto& charge = begun->charge;
  switch (begun->outcome) {
    case BeginOutcome::kFingerprintMismatch:
      co_return ToResponse(ApiError{ApiErrc::kIdempotencyKeyReused, "", "", {}, charge.public_id()});
    case BeginOutcome::kFinished: co_return Replay(charge);
    case BeginOutcome::kInFlight: {
      probe_.OnInFlightConflict();
      const auto retry_after = std::chrono::ceil<std::chrono::seconds>(charge.lease_remaining);
      co_return ToResponse(ApiError{ApiErrc::kRequestInFlight, "", "", retry_after, charge.public_id()});
    }
    case BeginOutcome::kCreated:
      if (co_await failpoints::HitAsync("charge.after_intent_commit")) {
        co_return co_await GiveUp(charge, lease, std::nullopt);
      }
      co_return co_await Capture(charge, lease, begun->first_request_id, cmd.trace);
    case BeginOutcome::kTakenOver: {
      log::ScopedTraceId scope(cmd.trace.trace_id);
      spdlog::info("charge {} taken over from a gone owner; asking the acquirer first", charge.public_id());
    }
      co_return co_await TakeOver(charge, lease, cmd.trace);
  }
  co_return ToResponse(ApiError{ApiErrc::kInternal, "unreachable"});
}

asio::awaitable<http::Response> ChargeService::Capture(const charges::Charge& charge, const charges::Lease& lease,
                                                       std::optional<std::string> recorded_first_request,
                                                       const trace::TraceContext& trace) {
  AttemptRecorder recorder(store_, probe_, charge.id, acquirer::Operation::kCapture, recorded_first_request.has_value());
  const acquirer::CaptureRequest request{charges::AcquirerIdempotencyKey(charge), charge.amount, charge.currency,
                                         charge.public_id(), charge.payment_method};
  acquirer::AttemptFunction attempt_capture =
      [&](acquirer::AttemptContext attempt) -> asio::awaitable<acquirer::AttemptOutcome> {
    co_return co_await acquirer_.Capture(request, attempt.request_id);
  };
  // Attempt 1 uses the request id recorded with the intent, so the attempts row and the wire agree.
  auto run = co_await acquirer::RunWithRetries(policy_, clock_, attempt_capture, &recorder, recorded_first_request);
  if (co_await failpoints::HitAsync("charge.after_acquirer_response")) {
    co_return co_await GiveUp(charge, lease, recorder.TakeLastFinish());
  }
  co_return co_await Finish(charge, lease, run, recorder, trace);
}

asio::awaitable<http::Response> ChargeService::TakeOver(const charges::Charge& charge, const charges::Lease& lease,
                                                        const trace::TraceContext& trace) {
  AttemptRecorder recorder(store_, probe_, charge.id, acquirer::Operation::kLookup, false);
  const acquirer::LookupRequest lookup{charges::AcquirerIdempotencyKey(charge),
                                       acquirer::ExpectedCapture{charge.amount, charge.currency, charge.public_id()}};
  auto run = co_await acquirer::LookupWithRetries(acquirer_, lookup, policy_, clock_, &recorder);
  if (run.last().kind == OutcomeKind::kNotFound) {
    // Not visible at the acquirer: capture with the same key. If an earlier capture is merely not visible
    // yet, the acquirer deduplicates by key and answers with it.
    co_await recorder.FlushFinish();
    co_return co_await Capture(charge, lease, std::nullopt, trace);
  }
  co_return co_await Finish(charge, lease, run, recorder, trace);
}

asio::awaitable<http::Response> ChargeService::Finish(const charges::Charge& charge, const charges::Lease& lease,
                                                      const acquirer::RetryRun& run, AttemptRecorder& recorder,
                                                      const trace::TraceContext& trace) {
  log::ScopedTraceId scope(trace.trace_id);
  auto transition = DecideTransition(run);
  if (!transition) {
    spdlog::info("charge {} pending: acquirer outcome unknown ({})", charge.public_id(),
                 acquirer::ToString(run.last().kind));
    co_return co_await GiveUp(charge, lease, recorder.TakeLastFinish());
  }

  transition->at = clock_.WallNow();
  transition->traceparent = trace.ToTraceparent();
  charges::Charge after = charge;
  after.status = transition->to;
  if (transition->acquirer_capture_id) after.acquirer_capture_id = transition->acquirer_capture_id;
  after.decline_code = transition->decline_code;
  after.failure_reason = transition->failure_reason;
  after.updated_at = std::chrono::time_point_cast<std::chrono::milliseconds>(transition->at);
  transition->at = after.updated_at;
  const auto response = ResponseFor(after);
  transition->response_status = response.status;
  transition->response_body = response.body;

  auto finish = recorder.TakeLastFinish();
  auto done = co_await store_.Complete(charge.id, *transition, finish);
  // Transient database trouble: the statement is idempotent (applied once, then a no-op), so retry it a
  // few times; an in-doubt commit is settled the same way, by what the row says now.
  for (int retry = 0; !done && retry < 3 && done.error().code != db::DbErrc::kFailed; ++retry) {
    spdlog::warn("completing charge {} failed ({}); retrying", charge.public_id(), done.error().detail);
    asio::steady_timer timer(co_await asio::this_coro::executor, std::chrono::milliseconds{100 << retry});
    co_await timer.async_wait(asio::use_awaitable);
    done = co_await store_.Complete(charge.id, *transition, finish);
  }
  if (!done) {
    // The acquirer's answer is known but not recorded. The charge stays pending under our lease; when
    // it expires a retry (or the reconciler) asks the acquirer by key and records the same truth.
    spdlog::error("charge {} outcome {} not recorded: {}", charge.public_id(), charges::ToString(transition->to),
                  done.error().detail);
    probe_.OnChargeOutcome("pending");
    co_return ToHttp(ResponseFor(charge), charge.public_id(), false);
  }
  const auto& now = done->charge;
  probe_.OnChargeOutcome(OutcomeLabel(now));
  if (done->applied) co_return ToHttp(response, now.public_id(), false);
  // Someone else (the reconciler, another instance) resolved it first: answer with what won.
  if (now.response_status && now.response_body) {
    co_return ToHttp({*now.response_status, *now.response_body}, now.public_id(), false);
  }
  co_return ToHttp(ResponseFor(now), now.public_id(), false);
}

asio::awaitable<http::Response> ChargeService::GiveUp(const charges::Charge& charge, const charges::Lease& lease,
                                                      std::optional<charges::AttemptFinish> last_attempt) {
  // The outcome stays unknown: the charge stays pending and its lease is given up, so the client's retry
  // takes it over at once (asking the acquirer by key) instead of waiting for the lease to run out.
  const auto released = co_await store_.Release(charge.id, lease.owner_id, last_attempt);
  if (!released) spdlog::warn("lease of charge {} not released: {}", charge.public_id(), released.error().detail);
  probe_.OnChargeOutcome("pending");
  co_return ToHttp(ResponseFor(charge), charge.public_id(), false);
}

http::Response ChargeService::Replay(const charges::Charge& charge) {
  probe_.OnReplay();
  if (charge.response_status && charge.response_body) {
    return ToHttp({*charge.response_status, *charge.response_body}, charge.public_id(), true);
  }
  // Resolved without a stored answer (by the reconciler): the answer its state calls for.
  return ToHttp(ResponseFor(charge), charge.public_id(), true);
}

asio::awaitable<http::Response> ChargeService::Get(const std::string& merchant_id, const std::string& public_id) {
  const auto uuid = charges::UuidFromPublicId(public_id);
  if (!uuid) co_return ToResponse(ApiError{ApiErrc::kNotFound, "No charge " + public_id + "."});
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
