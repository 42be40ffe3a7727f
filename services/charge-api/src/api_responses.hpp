// What charge-api answers: a charge rendered as JSON, the response a charge's state calls for, and every
// API error mapped to HTTP in one exhaustive switch.
#pragma once

#include <chrono>
#include <string>
#include <string_view>

#include "charge_outbox/charges/charge.hpp"
#include "charge_outbox/http/server.hpp"

namespace charge_outbox::charge_api {

enum class ApiErrc {
  kMissingIdempotencyKey,
  kMalformedIdempotencyKey,
  kInvalidField,
  kApiKeyMissing,        // no Authorization header
  kAuthSchemeNotBearer,  // an Authorization header of another scheme (Basic, ...)
  kApiKeyMalformed,      // Bearer, but not 1 to 256 visible ASCII characters: refused without a lookup
  kApiKeyUnknown,        // unknown or revoked: the two read the same, so no answer tells which keys exist
  kUnsupportedMediaType,
  kNotFound,
  kMethodNotAllowed,
  kIdempotencyKeyReused,  // same key, other parameters
  kRequestInFlight,       // same key, the first request still running
  kDatabaseUnavailable,   // before the intent was written: nothing was sent to the acquirer
  kTooManyFailedAuthentications,  // this client's unknown keys used up its budget: refused before any lookup
  kRateLimited,                   // the merchant's request rate on this instance
  kAcquirerBusy,          // this instance's acquirer connections are all taken: nothing was sent to it
  kInternal,
};

struct ApiError {
  ApiErrc code = ApiErrc::kInternal;
  std::string detail;
  std::string field;                      // kInvalidField
  std::chrono::seconds retry_after{0};    // 409, 429 and 503 answers: their Retry-After
  std::string charge_id;                  // kIdempotencyKeyReused, kRequestInFlight: the existing charge
  // A POST refused before its Idempotency-Key was used (kInvalidField, kUnsupportedMediaType): nothing was
  // stored for it, and the answer says the client may fix the request and send it with the same key.
  bool key_unused = false;
};

// A problem `type` of ours: "urn:charge-outbox:problem:" + slug (docs/charge-api.md, "Smaller decisions").
inline constexpr const char* kProblemTypePrefix = "urn:charge-outbox:problem:";
std::string ProblemType(std::string_view slug);

http::Response ToResponse(const ApiError& error);

// The charge as the API shows it (no payment method token, no internal lease or fingerprint).
std::string ChargeJson(const charges::Charge& charge);

// The status and body a charge's current state calls for: captured 201, pending and needs_review 202,
// failed and canceled 402 problem+json with the charge id and decline_code or failure_reason. Used for
// the first answer (then stored for replay) and for a repeat of a charge the reconciler resolved.
struct OutcomeResponse {
  int status = 0;
  std::string body;
};
OutcomeResponse ResponseFor(const charges::Charge& charge);

// Builds the HTTP response of a stored or computed outcome; `replayed` adds Idempotent-Replayed: true.
// 201 and 202 carry Location: /v1/charges/{id}; a 202 also Retry-After: `retry_after` (at least 1 s),
// which the caller decides from what the charge waits for (retry_after.hpp).
http::Response ToHttp(const OutcomeResponse& outcome, const std::string& public_id, bool replayed,
                      std::chrono::seconds retry_after);

}  // namespace charge_outbox::charge_api
