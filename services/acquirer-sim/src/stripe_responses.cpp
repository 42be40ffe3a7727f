#include "stripe_responses.hpp"

#include <boost/json/array.hpp>
#include <boost/json/serialize.hpp>
#include <algorithm>
#include <cctype>

namespace charge_outbox::acquirer_sim {
namespace {

namespace bhttp = boost::beast::http;
namespace json = boost::json;
using http::Response;

std::int64_t Seconds(std::int64_t micros) { return micros / 1'000'000; }

std::string LowerCurrency(const std::string& currency) {
  std::string lower = currency;
  std::ranges::transform(lower, lower.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return lower;
}

// The charge as it is now: refunded once the PaymentIntent was.
json::object ChargeObject(const PaymentIntent& intent) {
  const bool refunded = intent.refunded_at_us != 0;
  json::object charge;
  charge["id"] = intent.charge_id;
  charge["object"] = "charge";
  charge["amount"] = intent.request.amount;
  charge["amount_captured"] = intent.succeeded() ? intent.request.amount : 0;
  charge["amount_refunded"] = refunded ? intent.request.amount : 0;
  charge["captured"] = intent.succeeded();
  charge["created"] = Seconds(intent.created_at_us);
  charge["currency"] = LowerCurrency(intent.request.currency);
  charge["livemode"] = false;
  charge["paid"] = intent.succeeded();
  charge["payment_intent"] = intent.id;
  charge["refunded"] = refunded;
  charge["status"] = intent.succeeded() ? "succeeded" : "failed";
  if (!intent.succeeded()) {
    charge["failure_code"] = "card_declined";
  }
  return charge;
}

json::object LastPaymentError(const PaymentIntent& intent) {
  json::object error;
  error["type"] = "card_error";
  error["code"] = "card_declined";
  error["decline_code"] = intent.decline_code;
  error["message"] = "Your card was declined.";
  return error;
}

// The PaymentIntent; its fields do not change after creation (a refund shows on its charge), so this is
// also the PaymentIntent "as it was then" for its events.
json::object IntentObject(const PaymentIntent& intent, bool expand_latest_charge) {
  json::object pi;
  pi["id"] = intent.id;
  pi["object"] = "payment_intent";
  pi["amount"] = intent.request.amount;
  pi["amount_received"] = intent.succeeded() ? intent.request.amount : 0;
  pi["currency"] = LowerCurrency(intent.request.currency);
  pi["status"] = intent.succeeded() ? "succeeded" : "requires_payment_method";
  pi["capture_method"] = "automatic";
  pi["confirmation_method"] = "automatic";
  pi["created"] = Seconds(intent.created_at_us);
  pi["livemode"] = false;
  pi["metadata"] = json::object{{"charge_id", intent.request.reference}};
  pi["payment_method"] = intent.request.payment_method;
  if (intent.succeeded()) {
    pi["last_payment_error"] = nullptr;
  } else {
    pi["last_payment_error"] = LastPaymentError(intent);
  }
  if (expand_latest_charge) {
    pi["latest_charge"] = ChargeObject(intent);
  } else {
    pi["latest_charge"] = intent.charge_id;
  }
  pi["payment_method_types"] = json::array{"card"};
  return pi;
}

Response Json(unsigned status, const json::object& body) {
  return http::JsonResponse(static_cast<bhttp::status>(status), json::serialize(body));
}

json::object ErrorBody(json::object error) { return json::object{{"error", std::move(error)}}; }

json::object InvalidRequest(std::string_view code, std::string_view param, std::string_view message) {
  json::object error;
  error["type"] = "invalid_request_error";
  if (!code.empty()) error["code"] = code;
  if (!param.empty()) error["param"] = param;
  error["message"] = message;
  return error;
}

}  // namespace

StripeAnswer IntentCreatedAnswer(const PaymentIntent& intent, bool expand_latest_charge) {
  return {200, json::serialize(IntentObject(intent, expand_latest_charge))};
}

StripeAnswer IntentDeclinedAnswer(const PaymentIntent& intent) {
  json::object error = LastPaymentError(intent);
  error["charge"] = intent.charge_id;
  error["payment_intent"] = IntentObject(intent, false);
  return {402, json::serialize(ErrorBody(std::move(error)))};
}

StripeAnswer RefundAnswer(const PaymentIntent& intent, const RefundCreate& refund) {
  json::object metadata;
  for (const auto& [name, value] : refund.metadata) metadata[name] = value;
  json::object body;
  body["id"] = intent.refund_id;
  body["object"] = "refund";
  body["amount"] = intent.request.amount;
  body["charge"] = intent.charge_id;
  body["created"] = Seconds(intent.refunded_at_us);
  body["currency"] = LowerCurrency(intent.request.currency);
  body["metadata"] = std::move(metadata);
  body["payment_intent"] = intent.id;
  if (refund.reason) {
    body["reason"] = *refund.reason;
  } else {
    body["reason"] = nullptr;
  }
  body["status"] = "succeeded";
  return {200, json::serialize(body)};
}

StripeAnswer ServerErrorAnswer() {
  json::object error;
  error["type"] = "api_error";
  error["message"] = "An unknown error occurred while processing your request (a simulated server error).";
  return {500, json::serialize(ErrorBody(std::move(error)))};
}

StripeAnswer InvalidRequestAnswer(unsigned status, std::string_view code, std::string_view param,
                                  std::string_view message) {
  return {status, json::serialize(ErrorBody(InvalidRequest(code, param, message)))};
}

Response ToResponse(const StripeAnswer& answer) {
  return http::JsonResponse(static_cast<bhttp::status>(answer.status), answer.body);
}

Response IntentNow(const PaymentIntent& intent, bool expand_latest_charge) {
  return Json(200, IntentObject(intent, expand_latest_charge));
}

Response IntentSearchResult(const std::vector<PaymentIntent>& found, const IntentSearch& search) {
  json::array data;
  const std::size_t end = std::min(found.size(), search.offset + search.limit);
  for (std::size_t i = search.offset; i < end; ++i) {
    data.emplace_back(IntentObject(found[i], search.expand_latest_charge));
  }
  const bool has_more = end < found.size();
  json::object body;
  body["object"] = "search_result";
  body["data"] = std::move(data);
  body["has_more"] = has_more;
  if (has_more) {
    body["next_page"] = SearchPageToken(end);
  } else {
    body["next_page"] = nullptr;
  }
  body["url"] = "/v1/payment_intents/search";
  return Json(200, body);
}

Response IntentListResult(const StripePage<PaymentIntent>& page, bool expand_latest_charge) {
  json::array data;
  for (const auto& intent : page.data) data.emplace_back(IntentObject(intent, expand_latest_charge));
  json::object body;
  body["object"] = "list";
  body["data"] = std::move(data);
  body["has_more"] = page.has_more;
  body["url"] = "/v1/payment_intents";
  return Json(200, body);
}

Response EventListResult(const StripePage<StripeEvent>& page) {
  json::array data;
  for (const auto& event : page.data) {
    json::object object;
    if (event.type == StripeEventType::kChargeRefunded) {
      object = ChargeObject(event.intent);
    } else {
      object = IntentObject(event.intent, false);
    }
    json::object request;
    request["id"] = event.request_id;
    if (event.idempotency_key.empty()) {
      request["idempotency_key"] = nullptr;
    } else {
      request["idempotency_key"] = event.idempotency_key;
    }
    json::object item;
    item["id"] = event.id;
    item["object"] = "event";
    item["type"] = ToString(event.type);
    item["created"] = Seconds(event.created_at_us);
    item["api_version"] = kStripeApiVersion;
    item["livemode"] = false;
    item["pending_webhooks"] = 0;
    item["data"] = json::object{{"object", std::move(object)}};
    item["request"] = std::move(request);
    data.emplace_back(std::move(item));
  }
  json::object body;
  body["object"] = "list";
  body["data"] = std::move(data);
  body["has_more"] = page.has_more;
  body["url"] = "/v1/events";
  return Json(200, body);
}

Response ParamError(const StripeParamError& error) {
  return Json(400, ErrorBody(InvalidRequest(error.code, error.param, error.message)));
}

Response StripeRateLimited(std::string_view message) {
  return Json(429, ErrorBody(InvalidRequest("rate_limit", {}, message)));
}

Response IdempotencyMismatch() {
  json::object error;
  error["type"] = "idempotency_error";
  error["message"] =
      "Keys for idempotent requests can only be used with the same parameters they were first used with. "
      "Try using a key other than the one used on the original request.";
  return Json(400, ErrorBody(std::move(error)));
}

Response IdempotencyKeyInUse() {
  return Json(409, ErrorBody(InvalidRequest("idempotency_key_in_use", {},
                                            "There is currently another in-progress request using this Idempotent "
                                            "Key (that probably means you submitted twice, and the other request "
                                            "is still going through). Please try again later.")));
}

Response LoadBalancerUnavailable(std::int64_t retry_after_s) {
  Response response{bhttp::status::service_unavailable, 11};
  response.set(bhttp::field::content_type, "text/html");
  response.set(bhttp::field::retry_after, std::to_string(retry_after_s));
  response.body() =
      "<html><body><h1>503 Service Unavailable</h1>No server is available to handle this request.</body></html>\n";
  response.prepare_payload();
  return response;
}

Response StripeStorageUnavailable() {
  json::object error;
  error["type"] = "api_error";
  error["message"] = "The simulator could not write its log; nothing was done and nothing stored under the key.";
  return Json(503, ErrorBody(std::move(error)));
}

Response UnrecognizedUrl(std::string_view method, std::string_view path) {
  return Json(404, ErrorBody(InvalidRequest({}, {},
                                            "Unrecognized request URL (" + std::string(method) + ": " +
                                                std::string(path) + ").")));
}

}  // namespace charge_outbox::acquirer_sim
