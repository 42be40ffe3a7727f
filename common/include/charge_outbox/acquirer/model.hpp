// Acquirer model: what the acquirer client sends (capture, lookup, void, list requests), what it gets
// back (captures), and the outcome of one attempt: what kind of answer it was, what it proves about
// the money (its evidence class, docs/charge-states.md) and whether asking again is safe (its retryability).
//
// An attempt is not the business operation: one charge may need several attempts, each with a fresh
// request id and the same idempotency key. The outcome of each attempt is recorded as it is.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "charge_outbox/retry/retryability.hpp"

namespace charge_outbox::acquirer {

enum class Operation { kCapture, kLookup, kList, kVoid };

// Evidence classes, spelled as the `evidence_class` database enum.
enum class EvidenceClass {
  kNotSent,   // the request provably never left this process: the acquirer cannot have acted on it
  kUnknown,   // the acquirer may or may not have acted; only asking again (same key) or looking up can tell
  kDeclined,  // the acquirer explicitly refused the payment
  kApproved,  // the acquirer confirmed the operation (a capture exists, a void took effect)
};

// What one attempt produced, as precisely as the transport and the response allow.
enum class OutcomeKind {
  kCaptured,           // capture: 201 with a capture; lookup: 200 with a capture
  kDeclined,           // 402 with a decline_code
  kVoided,             // void: 200 {"status": "voided"}
  kPage,               // list: 200 with one page of captures
  kNotFound,           // lookup: 404. No capture is visible for the key, which is not proof that none exists
  kNotSent,            // DNS failure, connect refused or timed out, TLS handshake failed, no pool slot in time
  kTimedOut,           // the request was written (or was being written) and no complete answer came in time
  kConnectionDropped,  // the connection failed after the request was written, before a complete answer
  kServerError,        // 5xx other than 503: the acquirer may have acted before failing
  kStoredError,        // an error the acquirer stored under our key and replays for it (Stripe's 500): it may
                       // have acted, and asking again with the same key can only replay it; only a lookup tells
  kUnavailable,        // 503, usually with Retry-After
  kThrottled,          // 429, usually with Retry-After
  kInFlight,           // 409: the acquirer is still processing another request with the same key
  kUntrustedResponse,  // an answer we cannot take at its word: malformed HTTP, or a success or decline status
                       // whose body does not parse as the contract says
  kMismatch,           // the acquirer's capture for our key differs in amount, currency or reference from ours
  kContractError,      // 400/401/403/422, 404 outside lookup, other unexpected statuses: retrying cannot help
};

// Where the transport stopped. Everything before kWriteFailed guarantees no request byte was written.
enum class TransportStatus {
  kResponse,           // a complete HTTP response was read
  kResolveFailed,      // the acquirer's host name did not resolve
  kResolveTimedOut,    // the deadline passed while resolving
  kConnectRefused,     // the host answered the SYN with a reset
  kConnectTimedOut,    // the connect (or the call deadline) expired before the connection was up
  kConnectFailed,      // any other connect error (unreachable network or host)
  kTlsFailed,          // TCP was up but the TLS handshake failed or timed out (certificate, protocol)
  kPoolTimedOut,       // the deadline passed while every pooled connection was busy
  kWriteFailed,        // writing the request failed; some bytes may have reached the acquirer
  kSendTimedOut,       // the deadline passed while the request was being written
  kResponseTimedOut,   // the request was written; the deadline passed before a complete response
  kConnectionDropped,  // the request was written; the connection closed or reset before a complete response
  kResponseMalformed,  // bytes came back that are not an HTTP response within our size limits
};

enum class CaptureStatus { kCaptured, kVoided };

// A capture as the acquirer describes it.
struct Capture {
  std::string id;  // the acquirer's capture id ("cap_...")
  CaptureStatus status = CaptureStatus::kCaptured;
  std::int64_t amount = 0;  // minor units
  std::string currency;
  std::string reference;   // what we sent: the charge's public id
  std::string created_at;  // as the acquirer wrote it (RFC 3339)
  std::optional<std::string> idempotency_key;  // when the acquirer includes it (lookups and listings)
};

// POST /v1/captures. `payment_method` is a token, but still never logged.
struct CaptureRequest {
  std::string idempotency_key;
  std::int64_t amount = 0;
  std::string currency;
  std::string reference;
  std::string payment_method;
};

// What a capture found for our key must match before we believe it is ours (docs/background.md: confirm with
// remote id, reference, amount and currency, never with a close timestamp alone).
struct ExpectedCapture {
  std::int64_t amount = 0;
  std::string currency;
  std::string reference;
};

// GET /v1/captures?idempotency_key=K. With `expect`, a capture that differs is kMismatch. The Stripe adapter
// searches by `expect->reference` (our charge id in the PaymentIntent's metadata), then reads the events
// around `intent_created_at` for the key: the first capture run follows the intent within its retry budget.
struct LookupRequest {
  std::string idempotency_key;
  std::optional<ExpectedCapture> expect;
  std::optional<std::chrono::system_clock::time_point> intent_created_at;
};

// POST /v1/captures/{capture_id}/void. A void is an operation of its own, with its own key.
struct VoidRequest {
  std::string capture_id;
  std::string idempotency_key;
  // Earlier voids of this charge whose answer the acquirer stored as an error (Stripe's 500 under a key,
  // OutcomeKind::kStoredError). Their key would replay that error forever, so an adapter whose acquirer
  // stores errors sends this void under a key of its own for each. Safe: a capture is refunded in full at
  // most once, so a second void of one already voided is refused (Stripe: charge_already_refunded), not
  // paid twice. Our protocol stores no errors and ignores it.
  int stored_errors_before = 0;
};

// GET /v1/captures?created_from&created_to&limit: captures created in [from, to).
struct ListWindow {
  std::chrono::system_clock::time_point created_from;
  std::chrono::system_clock::time_point created_to;
  int limit = 100;  // page size asked for
};

// The result of one attempt. Plain data: copyable, no references into the transport.
struct AttemptOutcome {
  Operation operation = Operation::kCapture;
  OutcomeKind kind = OutcomeKind::kNotSent;
  TransportStatus transport = TransportStatus::kResponse;
  std::optional<int> http_status;
  std::optional<std::chrono::seconds> retry_after;  // from a Retry-After header, when one was usable
  std::optional<Capture> capture;                   // kCaptured, kMismatch
  std::optional<std::string> decline_code;          // kDeclined
  std::vector<Capture> page;                        // kPage
  std::optional<std::string> next_page_token;       // kPage, when more pages follow
  bool reused_connection = false;  // the request went over a pooled keep-alive connection
  // One line for logs and the attempts table: where and why. Never holds the API key, a payment
  // method or a response body (an acquirer may echo request fields in its errors).
  std::string detail;

  EvidenceClass evidence() const;
  retry::Retryability retryability() const;
};

// The two decisions an outcome kind implies; each is one exhaustive switch.
EvidenceClass EvidenceOf(OutcomeKind kind);
// The acquirer's transient outcomes are listed here and nowhere else: a retry loop, a mapping or a log
// asks for this class instead of naming the kinds again.
retry::Retryability RetryabilityOf(OutcomeKind kind);

// Stable snake_case names: the attempts table, logs and metric labels use them.
std::string_view ToString(Operation operation);
std::string_view ToString(EvidenceClass evidence);
std::string_view ToString(OutcomeKind kind);
std::string_view ToString(TransportStatus status);
std::string_view ToString(CaptureStatus status);

}  // namespace charge_outbox::acquirer
