#include "api_responses.hpp"

#include <boost/json/object.hpp>
#include <boost/json/serialize.hpp>

#include "charge_outbox/charges/evidence.hpp"

namespace charge_outbox::charge_api {
namespace {

namespace json = boost::json;
using http::Status;


http::Response Problem(Status status, std::string_view slug, const char* title, const std::string& detail,
                       json::object extra = {}) {
  extra["type"] = ProblemType(slug);
  return http::ProblemJson(status, title, detail, extra);
}

void WithRetryAfter(http::Response& r, std::chrono::seconds s) {
  r.set(boost::beast::http::field::retry_after, std::to_string(std::max<long long>(1, s.count())));
}

// RFC 6750 section 3: no error code when the request carries no bearer credentials (none at all, or
// another scheme); `invalid_token` for a token that is malformed, unknown or revoked (401 either way).
http::Response Unauthorized(std::string_view slug, const char* title, const std::string& detail,
                            const char* invalid_token_description) {
  auto r = Problem(Status::unauthorized, slug, title, detail);
  r.set(boost::beast::http::field::www_authenticate,
        invalid_token_description == nullptr
            ? std::string("Bearer")
            : std::string(R"(Bearer error="invalid_token", error_description=")") + invalid_token_description + "\"");
  return r;
}

// What a POST refused before its key was used may add: the client fixes it and keeps its key.
constexpr const char* kKeyUnused =
    " Nothing was stored for this request under its Idempotency-Key: fix it and send it again with the same key.";

}  // namespace

std::string ProblemType(std::string_view slug) { return std::string(kProblemTypePrefix) + std::string(slug); }

http::Response ToResponse(const ApiError& e) {
  switch (e.code) {
    case ApiErrc::kMissingIdempotencyKey:
      return Problem(Status::bad_request, "idempotency-key-missing", "Idempotency-Key header is required",
                     "Send a unique Idempotency-Key (1 to 255 visible ASCII characters) with every POST, and the "
                     "same key when you retry it. Nothing was stored for this request.");
    case ApiErrc::kMalformedIdempotencyKey:
      return Problem(Status::bad_request, "idempotency-key-malformed", "Idempotency-Key is malformed",
                     "An Idempotency-Key is 1 to 255 visible ASCII characters (0x21-0x7E). Nothing was stored for "
                     "this request.");
    case ApiErrc::kInvalidField:
      return Problem(Status::bad_request, "invalid-request", "Invalid request",
                     e.field + " " + e.detail + "." + (e.key_unused ? kKeyUnused : ""), {{"field", e.field}});
    case ApiErrc::kApiKeyMissing:
      return Unauthorized("api-key-missing", "API key missing", "Send Authorization: Bearer <your API key>.", nullptr);
    case ApiErrc::kAuthSchemeNotBearer:
      return Unauthorized("api-key-malformed", "Authorization is not a bearer API key",
                          "Send Authorization: Bearer <your API key>; no other scheme is accepted.", nullptr);
    case ApiErrc::kApiKeyMalformed:
      return Unauthorized("api-key-malformed", "API key malformed",
                          "An API key is 1 to 256 visible ASCII characters after \"Bearer \".", "malformed API key");
    case ApiErrc::kApiKeyUnknown:
      // Unknown and revoked read the same: no answer tells which keys exist.
      return Unauthorized("api-key-unknown", "Unknown or revoked API key",
                          "This API key is unknown or revoked. Send a current key of your merchant.",
                          "unknown or revoked API key");
    case ApiErrc::kUnsupportedMediaType:
      return Problem(Status::unsupported_media_type, "unsupported-media-type", "Unsupported media type",
                     std::string("Send the body as Content-Type: application/json.") + (e.key_unused ? kKeyUnused : ""));
    case ApiErrc::kNotFound:
      return Problem(Status::not_found, "not-found", "Not found", e.detail);
    case ApiErrc::kMethodNotAllowed:
      return Problem(Status::method_not_allowed, "method-not-allowed", "Method not allowed", e.detail);
    case ApiErrc::kIdempotencyKeyReused:
      // Not "nothing was charged": the key's own charge (named here) may well be captured. What this request
      // did is all this answer can say.
      return Problem(Status::unprocessable_entity, "idempotency-key-reused",
                     "Idempotency-Key already used with other parameters",
                     "This request did nothing. Its Idempotency-Key belongs to charge " + e.charge_id +
                         ", made with other parameters, whose outcome is its own: GET /v1/charges/" + e.charge_id +
                         " before you charge again.",
                     {{"charge_id", e.charge_id}});
    case ApiErrc::kRequestInFlight: {
      auto r = Problem(Status::conflict, "request-in-flight", "A request with this Idempotency-Key is in progress",
                       "Its outcome is not known yet. Retry after the Retry-After delay with the same key to get its "
                       "result, or GET the charge.",
                       {{"charge_id", e.charge_id}});
      WithRetryAfter(r, e.retry_after);
      return r;
    }
    case ApiErrc::kDatabaseUnavailable: {
      // The database is what knows the key's charge, and it did not answer: this says nothing about it.
      auto r = Problem(Status::service_unavailable, "unavailable", "Service temporarily unavailable",
                       "This answer says nothing about the charge of this Idempotency-Key: this or an earlier "
                       "request may have made one. Retry with the same key after the Retry-After delay, or GET "
                       "the charge; do not start over with a new key on this answer.");
      WithRetryAfter(r, e.retry_after);
      return r;
    }
    case ApiErrc::kAcquirerBusy: {
      // After the intent, the charge exists (pending): its id lets the client look it up meanwhile.
      json::object extra;
      if (!e.charge_id.empty()) extra["charge_id"] = e.charge_id;
      auto r = Problem(Status::service_unavailable, "acquirer-busy", "Too many charges waiting for the acquirer",
                       "This request sent nothing to the acquirer; an earlier request with this Idempotency-Key may "
                       "have. Retry with the same key after the Retry-After delay, or GET the charge; do not start "
                       "over with a new key on this answer.",
                       std::move(extra));
      WithRetryAfter(r, e.retry_after);
      return r;
    }
    case ApiErrc::kTooManyFailedAuthentications: {
      auto r = Problem(Status::too_many_requests, "too-many-failed-authentications",
                       "Too many requests with unknown API keys",
                       "This client sent too many unknown API keys; nothing was looked up. Retry after the "
                       "Retry-After delay with a valid key.");
      WithRetryAfter(r, e.retry_after);
      return r;
    }
    case ApiErrc::kRateLimited: {
      auto r = Problem(Status::too_many_requests, "rate-limited", "Request rate limit reached",
                       "This request was not processed; an earlier request with its Idempotency-Key may have made a "
                       "charge. Retry after the Retry-After delay with the same key.");
      WithRetryAfter(r, e.retry_after);
      return r;
    }
    case ApiErrc::kInternal:
      return Problem(Status::internal_server_error, "internal", "Internal error",
                     "This answer says nothing about the charge of this Idempotency-Key. Retry with the same key, "
                     "or GET the charge; a retry with the same key never charges twice.");
  }
  return Problem(Status::internal_server_error, "internal", "Internal error", "");
}

std::string ChargeJson(const charges::Charge& c) {
  json::object o;
  o["id"] = c.public_id();
  o["object"] = "charge";
  o["status"] = std::string(charges::ToString(c.status));
  o["amount"] = c.amount;
  o["currency"] = c.currency;
  o["order_id"] = c.order_id;
  if (c.description) o["description"] = *c.description;
  if (c.acquirer_capture_id) o["acquirer_capture_id"] = *c.acquirer_capture_id;
  if (c.decline_code) o["decline_code"] = *c.decline_code;
  if (c.failure_reason) o["failure_reason"] = *c.failure_reason;
  o["created_at"] = charges::FormatTimestamp(c.created_at);
  o["updated_at"] = charges::FormatTimestamp(c.updated_at);
  return json::serialize(o);
}

OutcomeResponse ResponseFor(const charges::Charge& c) {
  using charges::ChargeStatus;
  switch (c.status) {
    case ChargeStatus::kCaptured: return {201, ChargeJson(c)};
    case ChargeStatus::kPending:
    case ChargeStatus::kNeedsReview: return {202, ChargeJson(c)};
    case ChargeStatus::kFailed:
    case ChargeStatus::kCanceled: {
      json::object p;
      p["type"] = ProblemType(c.decline_code ? "card-declined" : "payment-failed");
      p["title"] = c.decline_code ? "The card was declined" : "The payment did not go through";
      p["status"] = 402;
      // What the record holds, and no more: a canceled charge's capture was voided (taken, then given
      // back); a person's `failed` rests on their decision, which the audit trail explains, not on proof.
      const auto reason = c.failure_reason.value_or("failed");
      std::string detail;
      if (c.decline_code) {
        detail = "The acquirer declined the payment: " + *c.decline_code + ".";
      } else if (c.status == ChargeStatus::kCanceled) {
        detail = "No money was kept: the capture was voided (" + reason + ").";
      } else if (reason == charges::reason::kOperatorDecision) {
        detail = "A person decided this charge failed (" + reason + "); we record no capture for it.";
      } else {
        detail = "No money was taken: " + reason + ".";
      }
      // The key is spent: it answers this from now on, so another attempt needs a key of its own.
      p["detail"] = detail + " This Idempotency-Key will keep answering this; a new attempt needs a new key.";
      p["charge_id"] = c.public_id();
      p["charge_status"] = std::string(charges::ToString(c.status));
      if (c.decline_code) p["decline_code"] = *c.decline_code;
      if (c.failure_reason) p["failure_reason"] = *c.failure_reason;
      return {402, json::serialize(p)};
    }
  }
  return {500, "{}"};
}

http::Response ToHttp(const OutcomeResponse& outcome, const std::string& public_id, bool replayed,
                      std::chrono::seconds retry_after) {
  http::Response r{static_cast<Status>(outcome.status), 11};
  r.set(boost::beast::http::field::content_type,
        outcome.status == 402 ? "application/problem+json" : "application/json");
  if (outcome.status == 201 || outcome.status == 202) {
    r.set(boost::beast::http::field::location, "/v1/charges/" + public_id);
  }
  if (outcome.status == 202) WithRetryAfter(r, retry_after);
  if (replayed) r.set("Idempotent-Replayed", "true");
  r.body() = outcome.body;
  r.prepare_payload();
  return r;
}

}  // namespace charge_outbox::charge_api
