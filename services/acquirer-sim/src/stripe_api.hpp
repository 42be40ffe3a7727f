// The Stripe dialect's HTTP surface (README.md, "Stripe dialect"): PaymentIntents, search, refunds and
// events, served beside our routes on the same port, credentials, store and fault profile. AcquirerSim
// authenticates and routes here every path Serves() claims.
#pragma once

#include <boost/asio/awaitable.hpp>
#include <functional>
#include <mutex>
#include <string_view>
#include <unordered_map>

#include "capture_store.hpp"
#include "charge_outbox/http/server.hpp"
#include "fault_profile.hpp"
#include "request_counts.hpp"
#include "sim_config.hpp"
#include "stripe_requests.hpp"

namespace charge_outbox::acquirer_sim {

// Stripe's search rate limit, per merchant: a token bucket refilled at `rate` per second, holding at
// most `rate`. Thread-safe.
class SearchRateLimiter {
 public:
  SearchRateLimiter(std::int64_t rate, const Clock& clock) : rate_(rate), clock_(clock) {}
  // Takes a token; false if there is none (the search is refused and takes nothing).
  bool TryAcquire(MerchantIndex merchant);

 private:
  struct Bucket {
    double tokens = 0;
    std::int64_t updated_us = 0;
  };
  const std::int64_t rate_;
  const Clock& clock_;
  std::mutex mutex_;
  std::unordered_map<MerchantIndex, Bucket> buckets_;
};

class StripeApi {
 public:
  // All references must outlive the StripeApi.
  StripeApi(CaptureStore& store, FaultEngine& faults, RequestCounts& counts, const StripeOptions& options,
            const Clock& clock);

  // The paths this dialect answers: /v1/payment_intents[/...], /v1/refunds, /v1/events.
  static bool Serves(std::string_view path);
  boost::asio::awaitable<http::Reply> Handle(const http::Request& request, MerchantIndex merchant,
                                             std::string_view path, std::string_view query);

 private:
  boost::asio::awaitable<http::Reply> CreateIntent(const http::Request& request, MerchantIndex merchant);
  boost::asio::awaitable<http::Reply> CreateRefund(const http::Request& request, MerchantIndex merchant);
  boost::asio::awaitable<http::Reply> RetrieveIntent(MerchantIndex merchant, std::string_view id,
                                                     const FormParams& params);
  boost::asio::awaitable<http::Reply> SearchIntents(MerchantIndex merchant, const FormParams& params);
  boost::asio::awaitable<http::Reply> ListIntents(MerchantIndex merchant, const FormParams& params);
  boost::asio::awaitable<http::Reply> ListEvents(MerchantIndex merchant, const FormParams& params);
  // A read under the fault profile's `operation` draw: refused (429, 503), failed (500), or `answer()`
  // delivered on time, late or not at all.
  boost::asio::awaitable<http::Reply> Read(Operation operation, std::string_view what,
                                           const std::function<http::Response()>& answer);
  // The idempotency layer for a POST with this key (kProceed without one).
  StripeBegin BeginKey(MerchantIndex merchant, std::string_view key, std::string_view route, const FormParams& form);
  // A stored answer again, with Idempotent-Replayed: true, under the fault profile's `replay` draw.
  boost::asio::awaitable<http::Reply> DeliverReplay(const StripeAnswer& answer);

  CaptureStore& store_;
  FaultEngine& faults_;
  RequestCounts& counts_;
  const std::int64_t retention_us_;
  SearchRateLimiter search_limiter_;
};

}  // namespace charge_outbox::acquirer_sim
