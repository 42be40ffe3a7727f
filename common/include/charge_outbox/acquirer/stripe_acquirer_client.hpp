// StripeAcquirerClient: the AcquirerClient over Stripe's API v1 (docs/stripe.md): a capture is a PaymentIntent
// confirmed at creation with automatic capture, our charge id in its metadata; a lookup searches by that id,
// then reads events by our key; a void is a refund; a window's listing is the PaymentIntents created in it.
// Same transport as HttpAcquirerClient (pool, deadlines, TLS). MakeAcquirerClient picks the adapter the
// configuration names.
#pragma once

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>
#include <memory>
#include <optional>
#include <string>

#include "charge_outbox/acquirer/acquirer_client.hpp"
#include "charge_outbox/acquirer/http_acquirer_client.hpp"

namespace charge_outbox::acquirer {

// Thread-safe, as HttpAcquirerClient. Searches are paced under `stripe.search_rate_limit` per second for the
// whole client (Stripe's limit is per account), so however many workers look up at once, none is refused.
class StripeAcquirerClient final : public AcquirerClient {
 public:
  // Throws config::ConfigError for an unusable base URL or CA file (start-up only).
  StripeAcquirerClient(boost::asio::any_io_executor executor, AcquirerClientConfig config);
  ~StripeAcquirerClient() override;
  StripeAcquirerClient(const StripeAcquirerClient&) = delete;
  StripeAcquirerClient& operator=(const StripeAcquirerClient&) = delete;

  // POST /v1/payment_intents (confirm, automatic capture), Idempotency-Key = request.idempotency_key.
  boost::asio::awaitable<AttemptOutcome> Capture(CaptureRequest request, std::string request_id) override;
  // Search by metadata charge_id = request.expect->reference; when it finds nothing and
  // request.intent_created_at is given, the events of the first capture run's time by
  // request.idempotency_key, then the PaymentIntent they name as it is now. One attempt of up to
  // 2 + events_pages requests: a failed search or read of the PaymentIntent is the attempt's outcome; failed
  // events leave the search's "not found", weak as ever.
  boost::asio::awaitable<AttemptOutcome> LookupByKey(LookupRequest request, std::string request_id) override;
  // POST /v1/refunds of the PaymentIntent request.capture_id. Idempotency-Key: "refund:" and
  // request.idempotency_key (its hash past 255 characters): Stripe has one key space, and callers pass the
  // charge's own key, which our protocol keeps apart from the capture's but Stripe would not.
  boost::asio::awaitable<AttemptOutcome> Void(VoidRequest request, std::string request_id) override;
  // GET /v1/payment_intents created in the window (to the second), newest first as Stripe lists; the page
  // holds the succeeded ones, refunded ones as voided; the token is the last PaymentIntent's id.
  boost::asio::awaitable<AttemptOutcome> ListPage(ListWindow window, std::optional<std::string> page_token,
                                                  std::string request_id) override;

 private:
  class Impl;
  std::shared_ptr<Impl> impl_;
};

// The adapter `config.kind` names. Throws config::ConfigError as the adapter's constructor does.
std::unique_ptr<AcquirerClient> MakeAcquirerClient(boost::asio::any_io_executor executor, AcquirerClientConfig config);

}  // namespace charge_outbox::acquirer
