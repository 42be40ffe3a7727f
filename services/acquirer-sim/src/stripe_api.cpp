#include "stripe_api.hpp"

#include <spdlog/spdlog.h>

#include <algorithm>

#include "delivery.hpp"
#include "request_validation.hpp"
#include "responses.hpp"
#include "stripe_responses.hpp"

namespace charge_outbox::acquirer_sim {
namespace {

namespace asio = boost::asio;
namespace bhttp = boost::beast::http;
using http::Reply;
using http::Response;

constexpr std::string_view kIntents = "/v1/payment_intents";
constexpr std::string_view kRefunds = "/v1/refunds";
constexpr std::string_view kEvents = "/v1/events";

// Releases a Stripe key left in flight when the request does not get to finish (Stop cancelled its
// latency wait, or it ended without storing an answer).
class StripeKeyGuard {
 public:
  StripeKeyGuard(CaptureStore& store, MerchantIndex merchant, std::string_view key)
      : store_(store), merchant_(merchant), key_(key) {}
  ~StripeKeyGuard() {
    if (!key_.empty()) store_.AbandonStripeKey(merchant_, key_);
  }
  StripeKeyGuard(const StripeKeyGuard&) = delete;
  StripeKeyGuard& operator=(const StripeKeyGuard&) = delete;

 private:
  CaptureStore& store_;
  MerchantIndex merchant_;
  std::string_view key_;
};

// The refusals the fault profile gives before anything is done (neither stored nor counted against the key).
std::optional<Response> FaultRefusal(const FaultDecision& decision) {
  if (decision.throttle) return StripeRateLimited("Too many requests hit the API too quickly (a simulated throttle).");
  if (decision.error) return LoadBalancerUnavailable(decision.retry_after_s);
  return std::nullopt;
}

// The Idempotency-Key header: absent is fine (every POST is then new); present, it must be one we accept.
std::optional<Response> InvalidKey(std::string_view key) {
  if (key.empty() || IsValidIdempotencyKey(key)) return std::nullopt;
  return ParamError({"idempotency_key_invalid", "Idempotency-Key",
                     "Idempotency-Key must be 1 to 255 visible ASCII characters."});
}

std::optional<Response> MalformedForm() {
  return ParamError({"parameter_invalid", "body", "The request's form encoding is malformed."});
}

// A POST's parameters, both as sent (for the idempotency layer) and as the route reads them; or the 400
// (never stored) for an invalid Idempotency-Key or body.
template <class Parsed>
struct PostParams {
  FormParams form;
  Parsed parsed;
};
template <class Parsed>
boost::system::result<PostParams<Parsed>, Response> ReadPost(const http::Request& request,
                                                             StripeParsed<Parsed> (*parse)(const FormParams&)) {
  if (auto refusal = InvalidKey(request["Idempotency-Key"])) return std::move(*refusal);
  auto form = ParseForm(request.body());
  if (!form) return *MalformedForm();
  auto parsed = parse(*form);
  if (!parsed) return ParamError(parsed.error());
  return PostParams<Parsed>{std::move(*form), std::move(*parsed)};
}

// The idempotency layer's refusals: the key still running (409) or used with other parameters (400).
std::optional<Response> KeyRefusal(const StripeBegin& begun) {
  if (begun.outcome == StripeBeginOutcome::kInFlight) return IdempotencyKeyInUse();
  if (begun.outcome == StripeBeginOutcome::kMismatch) return IdempotencyMismatch();
  return std::nullopt;
}

}  // namespace

bool SearchRateLimiter::TryAcquire(MerchantIndex merchant) {
  const std::int64_t now = clock_.NowMicros();
  std::lock_guard lock(mutex_);
  auto [it, inserted] = buckets_.try_emplace(merchant, Bucket{static_cast<double>(rate_), now});
  auto& bucket = it->second;
  const double elapsed_s = static_cast<double>(std::max<std::int64_t>(now - bucket.updated_us, 0)) / 1e6;
  bucket.tokens = std::min(static_cast<double>(rate_), bucket.tokens + elapsed_s * static_cast<double>(rate_));
  bucket.updated_us = now;
  if (bucket.tokens < 1.0) return false;
  bucket.tokens -= 1.0;
  return true;
}

StripeApi::StripeApi(CaptureStore& store, FaultEngine& faults, RequestCounts& counts, const StripeOptions& options,
                     const Clock& clock)
    : store_(store),
      faults_(faults),
      counts_(counts),
      retention_us_(std::chrono::duration_cast<std::chrono::microseconds>(options.idempotency_key_retention).count()),
      search_limiter_(options.search_rate_limit, clock) {}

bool StripeApi::Serves(std::string_view path) {
  return path == kIntents || (path.starts_with(kIntents) && path[kIntents.size()] == '/') || path == kRefunds ||
         path == kEvents;
}

asio::awaitable<Reply> StripeApi::Handle(const http::Request& request, MerchantIndex merchant, std::string_view path,
                                         std::string_view query) {
  const auto method = request.method();
  const auto unrecognized = [&] { return Answer(UnrecognizedUrl(request.method_string(), path)); };
  const bool get = method == bhttp::verb::get;
  if (method == bhttp::verb::post && path == kIntents) co_return co_await CreateIntent(request, merchant);
  if (method == bhttp::verb::post && path == kRefunds) co_return co_await CreateRefund(request, merchant);
  if (!get) co_return unrecognized();
  // The search rate limit comes before everything else, the query's validity included.
  if (path == "/v1/payment_intents/search") {
    counts_.Count(RequestKind::kSearch);
    if (!search_limiter_.TryAcquire(merchant)) {
      co_return Answer(StripeRateLimited(
          "Search rate limit exceeded: at most stripe.search_rate_limit searches per second per account."));
    }
  }
  const auto params = ParseForm(query);
  if (!params) co_return Answer(*MalformedForm());
  if (path == "/v1/payment_intents/search") co_return co_await SearchIntents(merchant, *params);
  if (path == kIntents) {
    counts_.Count(RequestKind::kList);
    co_return co_await ListIntents(merchant, *params);
  }
  if (path == kEvents) {
    counts_.Count(RequestKind::kEvents);
    co_return co_await ListEvents(merchant, *params);
  }
  const std::string_view id = path.substr(kIntents.size() + 1);
  if (id.empty() || id.find('/') != std::string_view::npos) co_return unrecognized();
  counts_.Count(RequestKind::kRetrieve);
  co_return co_await RetrieveIntent(merchant, id, *params);
}

StripeBegin StripeApi::BeginKey(MerchantIndex merchant, std::string_view key, std::string_view route,
                               const FormParams& form) {
  if (key.empty()) return {StripeBeginOutcome::kProceed, {}};  // no key: every POST is new
  return store_.BeginStripeKey(merchant, key, CanonicalParams(route, form), retention_us_);
}

asio::awaitable<Reply> StripeApi::DeliverReplay(const StripeAnswer& answer) {
  const FaultDecision decision = faults_.Draw(kOpReplay);
  if (auto refusal = FaultRefusal(decision)) co_return Answer(std::move(*refusal));
  co_await Sleep(decision.latency);
  if (decision.server_error) co_return co_await Deliver(decision, ToResponse(ServerErrorAnswer()), "replay");
  co_return co_await Deliver(decision, Replayed(ToResponse(answer)), "replay");
}

asio::awaitable<Reply> StripeApi::CreateIntent(const http::Request& request, MerchantIndex merchant) {
  counts_.Count(RequestKind::kCapture);
  const std::string_view key = request["Idempotency-Key"];
  auto post = ReadPost(request, &ParseIntentCreate);
  if (!post) co_return Answer(std::move(post.error()));
  const IntentCreate& create = post->parsed;

  const FaultDecision decision = faults_.Draw(kOpCapture, create.request.payment_method);
  if (auto refusal = FaultRefusal(decision)) co_return Answer(std::move(*refusal));
  const auto begun = BeginKey(merchant, key, "POST /v1/payment_intents", post->form);
  if (begun.outcome == StripeBeginOutcome::kReplay) co_return co_await DeliverReplay(begun.answer);
  if (auto refusal = KeyRefusal(begun)) co_return Answer(std::move(*refusal));
  StripeKeyGuard guard(store_, merchant, key);
  co_await Sleep(decision.latency);
  if (decision.server_error && !decision.server_error_work) {
    spdlog::info("fault: server error; PaymentIntent for {} not created, 500 stored under the key",
                 create.request.reference);
    const auto answer = ServerErrorAnswer();
    if (!key.empty() && !store_.StoreStripeAnswer(merchant, key, answer)) co_return Answer(StripeStorageUnavailable());
    co_return co_await Deliver(decision, ToResponse(answer), "server error");
  }
  IntentOptions options;
  options.decline_code = decision.decline_code;
  using std::chrono::microseconds;
  options.visibility_delay_us = std::chrono::duration_cast<microseconds>(decision.visibility_delay).count();
  options.search_lag_us = std::chrono::duration_cast<microseconds>(decision.search_lag).count();
  const bool expand = create.expand_latest_charge;
  const bool server_error = decision.server_error;
  const auto made = store_.CreateIntent(merchant, key, create.request, options, [&](const PaymentIntent& intent) {
    if (server_error) return ServerErrorAnswer();
    return intent.succeeded() ? IntentCreatedAnswer(intent, expand) : IntentDeclinedAnswer(intent);
  });
  if (!made) co_return Answer(StripeStorageUnavailable());
  if (server_error) {
    spdlog::info("fault: server error; PaymentIntent {} created, answered 500", made->first.id);
  }
  co_return co_await Deliver(decision, ToResponse(made->second), "payment_intent");
}

asio::awaitable<Reply> StripeApi::CreateRefund(const http::Request& request, MerchantIndex merchant) {
  counts_.Count(RequestKind::kVoid);
  const std::string_view key = request["Idempotency-Key"];
  auto post = ReadPost(request, &ParseRefundCreate);
  if (!post) co_return Answer(std::move(post.error()));
  const RefundCreate& refund = post->parsed;

  const FaultDecision decision = faults_.Draw(kOpVoid);
  if (auto refusal = FaultRefusal(decision)) co_return Answer(std::move(*refusal));
  const auto begun = BeginKey(merchant, key, "POST /v1/refunds", post->form);
  if (begun.outcome == StripeBeginOutcome::kReplay) {
    // A refund's replay is part of the `void` operation: its draw above decides its faults.
    co_await Sleep(decision.latency);
    co_return co_await Deliver(decision, Replayed(ToResponse(begun.answer)), "refund replay");
  }
  if (auto refusal = KeyRefusal(begun)) co_return Answer(std::move(*refusal));
  StripeKeyGuard guard(store_, merchant, key);
  co_await Sleep(decision.latency);
  // The endpoint ran: whatever it answers is stored under the key, refusals included (as at Stripe).
  const auto store_and_deliver = [&](StripeAnswer answer) -> asio::awaitable<Reply> {
    if (!key.empty() && !store_.StoreStripeAnswer(merchant, key, answer)) co_return Answer(StripeStorageUnavailable());
    co_return co_await Deliver(decision, ToResponse(answer), "refund");
  };
  if (decision.server_error && !decision.server_error_work) co_return co_await store_and_deliver(ServerErrorAnswer());
  const bool server_error = decision.server_error;
  const auto result =
      store_.Refund(merchant, key, refund.payment_intent, refund.amount, [&](const PaymentIntent& intent) {
        return server_error ? ServerErrorAnswer() : RefundAnswer(intent, refund);
      });
  if (result.outcome == RefundOutcome::kRefunded) {
    co_return co_await Deliver(decision, ToResponse(result.answer), "refund");
  }
  if (server_error && result.outcome != RefundOutcome::kStorageFailed) {
    co_return co_await store_and_deliver(ServerErrorAnswer());
  }
  switch (result.outcome) {
    case RefundOutcome::kRefunded:
      break;
    case RefundOutcome::kNotFound:
      co_return co_await store_and_deliver(InvalidRequestAnswer(
          404, "resource_missing", "payment_intent", "No such payment_intent: '" + refund.payment_intent + "'"));
    case RefundOutcome::kNotSucceeded:
      co_return co_await store_and_deliver(
          InvalidRequestAnswer(400, "payment_intent_unexpected_state", "payment_intent",
                               "This PaymentIntent's status is requires_payment_method; only a succeeded one "
                               "can be refunded."));
    case RefundOutcome::kAlreadyRefunded:
      co_return co_await store_and_deliver(InvalidRequestAnswer(
          400, "charge_already_refunded", {}, "Charge " + result.intent->charge_id + " has already been refunded."));
    case RefundOutcome::kAmountMismatch:
      co_return co_await store_and_deliver(InvalidRequestAnswer(
          400, "parameter_invalid_integer", "amount",
          "The simulator refunds in full only: amount must be the PaymentIntent's amount, " +
              std::to_string(result.intent->request.amount) + "."));
    case RefundOutcome::kStorageFailed:
      co_return Answer(StripeStorageUnavailable());
  }
  co_return Answer(StripeStorageUnavailable());
}

asio::awaitable<Reply> StripeApi::Read(Operation operation, std::string_view what,
                                       const std::function<Response()>& answer) {
  const FaultDecision decision = faults_.Draw(operation);
  if (auto refusal = FaultRefusal(decision)) co_return Answer(std::move(*refusal));
  co_await Sleep(decision.latency);
  if (decision.server_error) co_return co_await Deliver(decision, ToResponse(ServerErrorAnswer()), what);
  co_return co_await Deliver(decision, answer(), what);
}

asio::awaitable<Reply> StripeApi::RetrieveIntent(MerchantIndex merchant, std::string_view id,
                                                 const FormParams& params) {
  const auto parsed = ParseIntentRetrieve(params);
  if (!parsed) co_return Answer(ParamError(parsed.error()));
  co_return co_await Read(kOpLookup, "retrieve", [&] {
    const auto found = store_.RetrieveIntent(merchant, id);
    if (found) return IntentNow(*found, parsed->expand_latest_charge);
    return ToResponse(
        InvalidRequestAnswer(404, "resource_missing", "intent", "No such payment_intent: '" + std::string(id) + "'"));
  });
}

asio::awaitable<Reply> StripeApi::SearchIntents(MerchantIndex merchant, const FormParams& params) {
  const auto parsed = ParseIntentSearch(params);
  if (!parsed) co_return Answer(ParamError(parsed.error()));
  co_return co_await Read(kOpLookup, "search", [&] {
    return IntentSearchResult(store_.SearchIntents(merchant, parsed->charge_id), *parsed);
  });
}

asio::awaitable<Reply> StripeApi::ListIntents(MerchantIndex merchant, const FormParams& params) {
  const auto parsed = ParseIntentList(params);
  if (!parsed) co_return Answer(ParamError(parsed.error()));
  co_return co_await Read(kOpList, "list", [&] {
    const auto page = store_.ListIntents(merchant, parsed->created, parsed->starting_after, parsed->limit);
    if (page.unknown_cursor) {
      return ToResponse(InvalidRequestAnswer(400, "resource_missing", "starting_after",
                                             "No such payment_intent: '" + parsed->starting_after + "'"));
    }
    return IntentListResult(page, parsed->expand_latest_charge);
  });
}

asio::awaitable<Reply> StripeApi::ListEvents(MerchantIndex merchant, const FormParams& params) {
  const auto parsed = ParseEventList(params);
  if (!parsed) co_return Answer(ParamError(parsed.error()));
  co_return co_await Read(kOpLookup, "events", [&] {
    const auto page =
        parsed->matches_nothing
            ? StripePage<StripeEvent>{}
            : store_.ListEvents(merchant, parsed->types, parsed->created, parsed->starting_after, parsed->limit);
    if (page.unknown_cursor) {
      return ToResponse(InvalidRequestAnswer(400, "resource_missing", "starting_after",
                                             "No such event: '" + parsed->starting_after + "'"));
    }
    return EventListResult(page);
  });
}

}  // namespace charge_outbox::acquirer_sim
