#include "charge_outbox/charges/charge.hpp"

#include <cctype>

#include "charge_outbox/charges/charge_store.hpp"

#include "charge_outbox/util/sha256.hpp"
#include "charge_outbox/util/time.hpp"

namespace charge_outbox::charges {

std::string_view ToString(ChargeStatus status) {
  switch (status) {
    case ChargeStatus::kPending: return "pending";
    case ChargeStatus::kCaptured: return "captured";
    case ChargeStatus::kFailed: return "failed";
    case ChargeStatus::kCanceled: return "canceled";
    case ChargeStatus::kNeedsReview: return "needs_review";
  }
  return "unknown";
}

std::string_view ToString(Refusal refusal) {
  switch (refusal) {
    case Refusal::kNotOwner: return "not_owner";
    case Refusal::kPastDeadline: return "past_deadline";
    case Refusal::kVoidOnRecord: return "void_on_record";
  }
  return "unknown";
}

std::optional<ChargeStatus> ParseChargeStatus(std::string_view text) {
  for (const auto s : {ChargeStatus::kPending, ChargeStatus::kCaptured, ChargeStatus::kFailed, ChargeStatus::kCanceled,
                       ChargeStatus::kNeedsReview}) {
    if (ToString(s) == text) return s;
  }
  return std::nullopt;
}

std::string PublicChargeId(std::string_view uuid) {
  std::string id = "ch_";
  for (const char c : uuid) {
    if (c != '-') id += c;
  }
  return id;
}

std::optional<std::string> UuidFromPublicId(std::string_view public_id) {
  if (public_id.size() != 35 || !public_id.starts_with("ch_")) return std::nullopt;
  const auto hex = public_id.substr(3);
  std::string uuid;
  for (std::size_t i = 0; i < hex.size(); ++i) {
    const char c = hex[i];
    if (!std::isxdigit(static_cast<unsigned char>(c)) || std::isupper(static_cast<unsigned char>(c))) {
      return std::nullopt;
    }
    if (i == 8 || i == 12 || i == 16 || i == 20) uuid += '-';
    uuid += c;
  }
  return uuid;
}

std::string AcquirerIdempotencyKey(const Charge& charge) {
  auto scoped = charge.merchant_id + ":" + charge.idempotency_key;
  if (scoped.size() <= kAcquirerKeyLimit) return scoped;
  return charge.merchant_id + "#" + util::Sha256Hex(charge.idempotency_key);
}

std::string FormatTimestamp(Timestamp t) { return util::FormatRfc3339(t); }

}  // namespace charge_outbox::charges
