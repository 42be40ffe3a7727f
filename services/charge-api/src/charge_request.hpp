// The body of POST /v1/charges and the Idempotency-Key header: parsed, validated, fingerprinted.
// Pure functions: no I/O, so every rule is unit-tested.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <variant>

#include "charge_outbox/charges/charge.hpp"

namespace charge_outbox::charge_api {

using ChargeRequest = charges::ChargeTerms;

// Why a body was refused: the field (or "body") and what is wrong, for a 400 problem+json.
struct FieldError {
  std::string field;
  std::string problem;
};

// Lengths are in characters (Unicode code points), as JSON Schema's maxLength in docs/openapi.yaml counts
// them. payment_method is printable ASCII, so its characters are its bytes, as the acquirer counts them;
// and the largest body the schema allows stays under the 16 KiB body limit even with every character
// \u-escaped (12 bytes for one above U+FFFF).
inline constexpr std::int64_t kMaxAmount = 999'999'999'999;  // minor units; far above any card limit
inline constexpr std::size_t kMaxIdentifierLength = 255;    // order_id, payment_method
inline constexpr std::size_t kMaxDescriptionLength = 1000;

// Strict: a JSON object with exactly the known members, right types, sane sizes. Nesting is refused
// by the parser before any value is built, so no body can exhaust the stack.
std::variant<ChargeRequest, FieldError> ParseChargeRequest(std::string_view body);

// Unicode code points in UTF-8 text (Boost.JSON has validated it): the bytes that start a character.
std::size_t CharacterCount(std::string_view utf8);

// 1 to 255 visible ASCII characters (0x21-0x7E).
bool IsValidIdempotencyKey(std::string_view key);

// An active ISO 4217 code a card can be charged in (not just three capital letters; not a metal, a
// fund code or XXX).
bool IsIso4217Currency(std::string_view code);
// Every code IsIso4217Currency accepts, sorted: docs/openapi.yaml's enum is checked against it.
std::span<const std::string_view> AcceptedCurrencies();

// SHA-256 of an unambiguous encoding of every parameter that defines the charge: the same key with a
// different fingerprint is a different request (422), never a replay.
charges::Fingerprint RequestFingerprint(const ChargeRequest& request);

}  // namespace charge_outbox::charge_api
