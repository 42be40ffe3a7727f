// Charge: the local record of one payment operation, its states (docs/charge-states.md) and its identifiers.
#pragma once

#include <array>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace charge_outbox::charges {

enum class ChargeStatus { kPending, kCaptured, kFailed, kCanceled, kNeedsReview };

std::string_view ToString(ChargeStatus status);  // API and database spelling: "pending", ...
std::optional<ChargeStatus> ParseChargeStatus(std::string_view text);
inline bool IsTerminal(ChargeStatus s) { return s != ChargeStatus::kPending; }

using Timestamp = std::chrono::system_clock::time_point;
using Fingerprint = std::array<std::uint8_t, 32>;

// "ch_" + 32 hex digits, from the charge's uuid; the id the API returns and the acquirer's `reference`.
std::string PublicChargeId(std::string_view uuid);
// The uuid behind a public id; nullopt if `public_id` is not one.
std::optional<std::string> UuidFromPublicId(std::string_view public_id);
// RFC 3339, UTC, milliseconds: the same text the database's rfc3339() produces.
std::string FormatTimestamp(Timestamp t);

// What a client asks for in POST /v1/charges: the terms of one charge.
struct ChargeTerms {
  std::int64_t amount = 0;  // minor units
  std::string currency;     // ISO 4217
  std::string order_id;
  std::string payment_method;  // acquirer token: never logged
  std::optional<std::string> description;
};

struct Charge {
  std::string id;  // uuid
  std::string merchant_id;
  std::string idempotency_key;
  Fingerprint fingerprint{};
  std::string order_id;
  std::int64_t amount = 0;
  std::string currency;
  std::string payment_method;  // acquirer token: never logged
  std::optional<std::string> description;
  ChargeStatus status = ChargeStatus::kPending;
  std::optional<std::string> acquirer_capture_id;
  std::optional<std::string> decline_code;
  std::optional<std::string> failure_reason;
  std::optional<std::string> owner_id;
  std::chrono::milliseconds lease_remaining{0};  // 0 when there is no live lease
  std::optional<int> response_status;            // the first response, stored for replay
  std::optional<std::string> response_body;
  int last_sequence = 0;
  int attempt_count = 0;
  std::string traceparent;
  Timestamp created_at{};
  Timestamp updated_at{};
  // How old the charge was when this row was read, by the database's clock alone (now() - created_at).
  // Deadlines are judged from it plus the reader's monotonic time since the read, never from a host's
  // wall clock against the database's created_at.
  std::chrono::milliseconds age{0};

  std::string public_id() const { return PublicChargeId(id); }
};

// Whether `charge`, read `since_read` ago (by the reader's monotonic clock), is past `deadline`.
inline bool PastDeadline(const Charge& charge, std::chrono::milliseconds deadline,
                         std::chrono::steady_clock::duration since_read) {
  return charge.age + std::chrono::duration_cast<std::chrono::milliseconds>(since_read) >= deadline;
}

// The Idempotency-Key the acquirer sees for a charge, scoped by the merchant so two merchants' equal keys
// never meet at the acquirer: `<merchant uuid>:<client key>` while that fits the acquirer's 255
// characters (client keys up to 218), else `<merchant uuid>#<SHA-256 of the client key, 64 hex digits>`.
// Character 36 tells the two forms apart (':' or '#'), so a hashed key never equals a key sent as is.
// charge-api and the reconciler both derive it here, so both always ask about the same key.
inline constexpr std::size_t kAcquirerKeyLimit = 255;
std::string AcquirerIdempotencyKey(const Charge& charge);

}  // namespace charge_outbox::charges
