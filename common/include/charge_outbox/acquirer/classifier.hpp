// Outcome classifier: turns what the transport saw (where it stopped, and the HTTP response if one
// arrived) into an AttemptOutcome. Pure functions over plain data, so every failure mode is a unit
// test without sockets; the HTTP client calls exactly these.
//
// Decisions that are not obvious from the acquirer's contract:
// - A success status (201 capture, 200 lookup/void/list) whose body does not parse as the contract
//   says is kUntrustedResponse (evidence unknown), never "approved with garbage": we cannot confirm
//   the amount, currency, reference or capture id, so we cannot claim the money moved as we asked.
//   The same goes for a 402 without a decline_code: it is not a decline we can follow.
// - A 404 is a legitimate "not found" for a lookup and a contract error everywhere else.
// - Every HTTP answer other than a confirmed capture/void/page or a decline is evidence `unknown`,
//   including contract errors: a 422 says our key already belongs to another request, which may well
//   have captured. `not_sent` is kept for failures where no request byte was written.
#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "charge_outbox/acquirer/model.hpp"

namespace charge_outbox::acquirer {

// Limits on response bodies we parse as JSON; deeper or larger bodies are untrusted.
inline constexpr std::size_t kMaxJsonBodyBytes = 1024 * 1024;
inline constexpr std::size_t kMaxJsonDepth = 16;

struct HttpResponse {
  int status = 0;
  // Header fields as received; names compare case-insensitively.
  std::vector<std::pair<std::string, std::string>> headers;
  std::string body;

  // The first field named `name` (case-insensitive), if any.
  std::optional<std::string_view> Header(std::string_view name) const;
};

// What the transport saw for one request.
struct TransportResult {
  TransportStatus status = TransportStatus::kResponse;
  std::optional<HttpResponse> response;  // set exactly when status == kResponse
  bool reused_connection = false;
  std::string detail;  // the system error, for logs ("Connection refused")
};

// `now` is the wall clock, needed only to turn a Retry-After HTTP-date into a delay.
AttemptOutcome ClassifyCapture(const TransportResult& result, const CaptureRequest& sent,
                               std::chrono::system_clock::time_point now);
AttemptOutcome ClassifyLookup(const TransportResult& result, const LookupRequest& sent,
                              std::chrono::system_clock::time_point now);
AttemptOutcome ClassifyVoid(const TransportResult& result, std::chrono::system_clock::time_point now);
AttemptOutcome ClassifyListPage(const TransportResult& result, std::chrono::system_clock::time_point now);

// Retry-After (RFC 9110 section 10.2.3): delta-seconds, or an HTTP-date in any of the three formats a
// recipient must accept (IMF-fixdate, RFC 850, asctime). A date in the past is zero; a value over a
// day is clamped to kMaxRetryAfter (longer than any budget, so the policy stops rather than ignoring
// the acquirer's request to back off); anything unparseable is nullopt.
inline constexpr std::chrono::seconds kMaxRetryAfter{24 * 60 * 60};
std::optional<std::chrono::seconds> ParseRetryAfter(std::string_view value,
                                                    std::chrono::system_clock::time_point now);

// Parses an HTTP-date; nullopt if it is none of the three formats or not a real calendar date. `now`
// resolves the two-digit year of the RFC 850 format (RFC 9110: never more than 50 years ahead).
std::optional<std::chrono::system_clock::time_point> ParseHttpDate(std::string_view value,
                                                                   std::chrono::system_clock::time_point now);

// Parses one capture object of the acquirer contract; nullopt if any field is missing or mistyped.
// Exposed for the reconciler's tests and for fakes that build captures from JSON.
std::optional<Capture> ParseCaptureJson(std::string_view body);

}  // namespace charge_outbox::acquirer
