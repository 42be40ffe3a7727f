// What the acquirer accepts from a merchant: a capture body, an Idempotency-Key, a list's page token.
// Pure functions, so each rule is unit-tested without a server.
#pragma once

#include <boost/system/result.hpp>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "capture_log.hpp"

namespace charge_outbox::acquirer_sim {

// Why a capture body is refused: the member and the problem.
struct FieldProblem {
  std::string field;
  std::string detail;
};

// Validates a POST /v1/captures body: amount an integer > 0, currency three upper-case letters,
// reference and payment_method non-empty strings of at most 255 characters, nothing else.
boost::system::result<CaptureRequest, FieldProblem> ParseCaptureRequest(std::string_view body);

// 1 to 255 visible ASCII characters, as charge-api requires of its own clients.
bool IsValidIdempotencyKey(std::string_view key);

// A list's next_page_token ("pt_" and the cursor in hex) and its reading back; std::nullopt for a
// token this acquirer did not issue.
std::string PageToken(std::uint64_t cursor);
std::optional<std::uint64_t> ParsePageToken(std::string_view token);

}  // namespace charge_outbox::acquirer_sim
