#include "charge_outbox/acquirer/stripe_acquirer_client.hpp"

#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <algorithm>
#include <cctype>
#include <mutex>

#include "charge_outbox/acquirer/stripe_classifier.hpp"
#include "charge_outbox/config/config.hpp"
#include "charge_outbox/util/sha256.hpp"
#include "http_transport.hpp"

namespace charge_outbox::acquirer {

namespace {

namespace asio = boost::asio;
namespace http = boost::beast::http;
using detail::Params;
using detail::RequestSpec;
using std::chrono::system_clock;

constexpr std::string_view kForm = "application/x-www-form-urlencoded";
constexpr int kStripeMaxLimit = 100;

std::string Lower(std::string_view text) {
  std::string out(text);
  std::transform(out.begin(), out.end(), out.begin(), [](unsigned char c) { return std::tolower(c); });
  return out;
}

std::int64_t FloorSeconds(system_clock::time_point t) {
  return std::chrono::floor<std::chrono::seconds>(t.time_since_epoch()).count();
}
std::int64_t CeilSeconds(system_clock::time_point t) {
  return std::chrono::ceil<std::chrono::seconds>(t.time_since_epoch()).count();
}

// Stripe's search query language: a value in single quotes, with ' and \ escaped.
std::string SearchQuery(std::string_view charge_id) {
  std::string quoted;
  for (const char c : charge_id) {
    if (c == '\'' || c == '\\') quoted += '\\';
    quoted += c;
  }
  return "metadata['charge_id']:'" + quoted + "'";
}

// The query strings, built outside the coroutines: GCC 12 cannot take braced lists of string literals
// into a coroutine frame ("array used as initializer").
Params SearchParams(std::string_view charge_id) {
  return {{"query", SearchQuery(charge_id)}, {"limit", "10"}, {"expand[]", "data.latest_charge"}};
}

Params EventsParams(system_clock::time_point from, system_clock::time_point to,
                    const std::optional<std::string>& cursor) {
  Params params = {{"types[]", "payment_intent.succeeded"},
                   {"types[]", "payment_intent.payment_failed"},
                   {"created[gte]", std::to_string(FloorSeconds(from))},
                   {"created[lte]", std::to_string(CeilSeconds(to))},
                   {"limit", std::to_string(kStripeMaxLimit)}};
  if (cursor) params.emplace_back("starting_after", *cursor);
  return params;
}

// Stripe has one key space per account, where our protocol keeps void keys apart from capture keys: the
// void's key (the charge's own, as callers pass it) would be the capture's, and Stripe would answer
// idempotency_error. The refund's key is derived from it, the same for every attempt, within 255 characters:
// `refund:<key>`, then `refund2:<key>`, `refund3:<key>`... after each refund whose 500 Stripe stored.
std::string RefundKey(std::string_view void_key, int stored_errors_before) {
  const std::string kind = stored_errors_before > 0 ? "refund" + std::to_string(stored_errors_before + 1) : "refund";
  if (kind.size() + 1 + void_key.size() <= 255) return kind + ":" + std::string(void_key);
  return kind + "#" + util::Sha256Hex(void_key);
}

Params CredentialCheckParams() { return {{"limit", "1"}}; }
Params ExpandLatestCharge() { return {{"expand[]", "latest_charge"}}; }

// Paces searches under Stripe's per-account limit: each takes the next slot, 1/rate after the last, so a
// burst of lookups from many workers is spread rather than refused (a 429 would cost a backoff instead).
class Pacer {
 public:
  explicit Pacer(double per_second)
      : interval_(std::chrono::duration_cast<std::chrono::steady_clock::duration>(
            std::chrono::duration<double>(1.0 / std::max(per_second, 0.001)))) {}

  asio::awaitable<void> Wait() {
    std::chrono::steady_clock::time_point slot;
    {
      std::lock_guard lock(mutex_);
      slot = std::max(next_, std::chrono::steady_clock::now());
      next_ = slot + interval_;
    }
    if (slot <= std::chrono::steady_clock::now()) co_return;
    asio::steady_timer timer(co_await asio::this_coro::executor, slot);
    co_await timer.async_wait(asio::use_awaitable);
  }

 private:
  std::chrono::steady_clock::duration interval_;
  std::mutex mutex_;
  std::chrono::steady_clock::time_point next_{};
};

}  // namespace

class StripeAcquirerClient::Impl {
 public:
  Impl(asio::any_io_executor executor, AcquirerClientConfig config)
      : transport(std::make_shared<detail::HttpTransport>(std::move(executor), std::move(config))),
        search_pacer(transport->config().stripe.search_rate_limit) {}

  const StripeOptions& options() const { return transport->config().stripe; }

  RequestSpec Get(std::string_view path, const Params& params, std::string request_id) const {
    return RequestSpec{http::verb::get, transport->Target(path, params), {}, {}, std::nullopt, std::move(request_id),
                       {{"Stripe-Version", options().api_version}}};
  }
  RequestSpec Post(std::string_view path, const Params& form, std::string idempotency_key,
                   std::string request_id) const {
    return RequestSpec{http::verb::post, transport->Target(path, {}), detail::FormBody(form), std::string(kForm),
                       std::move(idempotency_key), std::move(request_id), {{"Stripe-Version", options().api_version}}};
  }

  static asio::awaitable<AttemptOutcome> Lookup(std::shared_ptr<Impl> self, LookupRequest request,
                                                std::string request_id);

  std::shared_ptr<detail::HttpTransport> transport;
  Pacer search_pacer;
};

StripeAcquirerClient::StripeAcquirerClient(asio::any_io_executor executor, AcquirerClientConfig config)
    : impl_(std::make_shared<Impl>(std::move(executor), std::move(config))) {}

StripeAcquirerClient::~StripeAcquirerClient() = default;

asio::awaitable<AttemptOutcome> StripeAcquirerClient::Capture(CaptureRequest request, std::string request_id) {
  // off_session: no customer is present to authenticate, so a card that needs it is declined at once
  // (authentication_required) rather than left in requires_action.
  const Params form = {
      {"amount", std::to_string(request.amount)},
      {"currency", Lower(request.currency)},
      {"payment_method", request.payment_method},
      {"confirm", "true"},
      {"off_session", "true"},
      {"payment_method_types[]", "card"},
      {"metadata[charge_id]", request.reference},
      {"expand[]", "latest_charge"},
  };
  auto spec = impl_->Post("/v1/payment_intents", form, request.idempotency_key, std::move(request_id));
  return detail::HttpTransport::Call(
      impl_->transport, std::move(spec),
      [sent = std::move(request)](const TransportResult& result, system_clock::time_point now) {
        return ClassifyStripeCapture(result, sent, now);
      });
}

asio::awaitable<AttemptOutcome> StripeAcquirerClient::LookupByKey(LookupRequest request, std::string request_id) {
  return Impl::Lookup(impl_, std::move(request), std::move(request_id));
}

asio::awaitable<AttemptOutcome> StripeAcquirerClient::Impl::Lookup(std::shared_ptr<Impl> self, LookupRequest request,
                                                                   std::string request_id) {
  auto& impl = *self;
  if (!request.expect.has_value()) {
    // Nothing to search for (a credential check): one list request proves the key, and finds nothing.
    auto outcome = co_await detail::HttpTransport::Call(
        impl.transport, impl.Get("/v1/payment_intents", CredentialCheckParams(), request_id), &ClassifyStripeListPage);
    outcome.operation = Operation::kLookup;
    // Any 200 proves the key, whatever the page holds.
    if (outcome.http_status == 200) {
      outcome.kind = OutcomeKind::kNotFound;
      outcome.page.clear();
      outcome.next_page_token.reset();
      outcome.detail = "lookup: HTTP 200: no charge id to search for";
    }
    co_return outcome;
  }

  co_await impl.search_pacer.Wait();
  const auto search = SearchParams(request.expect->reference);
  auto searched = co_await detail::HttpTransport::Call(
      impl.transport, impl.Get("/v1/payment_intents/search", search, request_id),
      [&request](const TransportResult& result, system_clock::time_point now) {
        return ClassifyStripeSearch(result, request, now);
      });
  if (searched.kind != OutcomeKind::kNotFound || !request.intent_created_at.has_value() ||
      impl.options().events_pages <= 0) {
    co_return searched;
  }

  // Search lags; events do not. The first capture run follows the intent within one retry budget; the
  // events of those seconds (a minute either side for the clocks) are read newest first. A later resubmit's
  // PaymentIntent is left to the search.
  const auto& config = impl.transport->config();
  const auto from = *request.intent_created_at - std::chrono::minutes{1};
  const auto to = *request.intent_created_at + config.retry.backoff.budget + config.request_timeout +
                  std::chrono::minutes{1};
  std::optional<std::string> cursor;
  for (int page = 0; page < impl.options().events_pages; ++page) {
    const auto params = EventsParams(from, to, cursor);
    const auto response = co_await detail::HttpTransport::Send(impl.transport, impl.Get("/v1/events", params, request_id));
    auto events = ClassifyStripeEventsPage(response, request.idempotency_key, system_clock::now());
    if (events.outcome.kind != OutcomeKind::kPage) {
      // Search's "nothing" stands, as weak as ever; the events' failure is in the detail.
      searched.detail += "; events unreadable: " + events.outcome.detail;
      co_return searched;
    }
    if (events.payment_intent_id) {
      const auto expand = ExpandLatestCharge();
      co_return co_await detail::HttpTransport::Call(
          impl.transport,
          impl.Get("/v1/payment_intents/" + detail::Encode(*events.payment_intent_id), expand, request_id),
          [&request](const TransportResult& result, system_clock::time_point now) {
            return ClassifyStripeRetrieve(result, request, now);
          });
    }
    if (!events.next_cursor) {
      searched.detail += "; no event for the key";
      co_return searched;
    }
    cursor = std::move(events.next_cursor);
  }
  searched.detail += "; no event for the key in " + std::to_string(impl.options().events_pages) + " page(s)";
  co_return searched;
}

asio::awaitable<AttemptOutcome> StripeAcquirerClient::Void(VoidRequest request, std::string request_id) {
  const Params form = {{"payment_intent", request.capture_id}};
  auto spec = impl_->Post("/v1/refunds", form, RefundKey(request.idempotency_key, request.stored_errors_before),
                          std::move(request_id));
  return detail::HttpTransport::Call(impl_->transport, std::move(spec), &ClassifyStripeRefund);
}

asio::awaitable<AttemptOutcome> StripeAcquirerClient::ListPage(ListWindow window, std::optional<std::string> page_token,
                                                               std::string request_id) {
  // Stripe's `created` counts seconds: the listing covers the window rounded out to whole seconds, and the
  // window report matches what it lists by charge id, not by time.
  Params params = {{"created[gte]", std::to_string(FloorSeconds(window.created_from))},
                   {"created[lt]", std::to_string(CeilSeconds(window.created_to))},
                   {"limit", std::to_string(std::clamp(window.limit, 1, kStripeMaxLimit))},
                   {"expand[]", "data.latest_charge"}};
  if (page_token) params.emplace_back("starting_after", std::move(*page_token));
  return detail::HttpTransport::Call(impl_->transport,
                                     impl_->Get("/v1/payment_intents", params, std::move(request_id)),
                                     &ClassifyStripeListPage);
}

std::unique_ptr<AcquirerClient> MakeAcquirerClient(asio::any_io_executor executor, AcquirerClientConfig config) {
  switch (config.kind) {
    case AcquirerKind::kStripe: return std::make_unique<StripeAcquirerClient>(std::move(executor), std::move(config));
    case AcquirerKind::kNative: break;
  }
  return std::make_unique<HttpAcquirerClient>(std::move(executor), std::move(config));
}

}  // namespace charge_outbox::acquirer
