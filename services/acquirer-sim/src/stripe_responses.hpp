// The Stripe dialect's answers: Stripe's objects (PaymentIntent, charge, refund, event, lists) and its
// error bodies ({"error": {"type", "code", ...}}), as README.md, "Stripe dialect", shows them.
#pragma once

#include <map>
#include <string>
#include <string_view>

#include "capture_store.hpp"
#include "charge_outbox/http/server.hpp"
#include "stripe_requests.hpp"

namespace charge_outbox::acquirer_sim {

// The API version the simulator's events say they were rendered with.
inline constexpr std::string_view kStripeApiVersion = "2024-06-20";

// 200: the PaymentIntent as created (the create's answer, stored under its key).
StripeAnswer IntentCreatedAnswer(const PaymentIntent& intent, bool expand_latest_charge);
// 402 card_error carrying the declined PaymentIntent.
StripeAnswer IntentDeclinedAnswer(const PaymentIntent& intent);
// 200: the refund just made.
StripeAnswer RefundAnswer(const PaymentIntent& intent, const RefundCreate& refund);
// 500 api_error: the endpoint failed (the fault profile's server_error_rate).
StripeAnswer ServerErrorAnswer();
// 400/404 invalid_request_error with a code (and `param` when not empty).
StripeAnswer InvalidRequestAnswer(unsigned status, std::string_view code, std::string_view param,
                                  std::string_view message);

http::Response ToResponse(const StripeAnswer& answer);

// Reads.
http::Response IntentNow(const PaymentIntent& intent, bool expand_latest_charge);
http::Response IntentSearchResult(const std::vector<PaymentIntent>& found, const IntentSearch& search);
http::Response IntentListResult(const StripePage<PaymentIntent>& page, bool expand_latest_charge);
http::Response EventListResult(const StripePage<StripeEvent>& page);

// Refusals that are never stored.
http::Response ParamError(const StripeParamError& error);
http::Response StripeRateLimited(std::string_view message);
http::Response IdempotencyMismatch();
http::Response IdempotencyKeyInUse();
// 503 as a load balancer in front of the API gives it: not JSON, not Stripe's.
http::Response LoadBalancerUnavailable(std::int64_t retry_after_s);
// 503 JSON: the log could not be written; nothing done, nothing stored.
http::Response StripeStorageUnavailable();
http::Response UnrecognizedUrl(std::string_view method, std::string_view path);

}  // namespace charge_outbox::acquirer_sim
