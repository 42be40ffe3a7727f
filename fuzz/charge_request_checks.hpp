// The promises ParseChargeRequest makes about a body it accepts (services/charge-api/README.md and the
// spec), checked on every accepted input by the two targets that reach it.
#pragma once

#include <boost/json/object.hpp>
#include <boost/json/serialize.hpp>

#include <algorithm>
#include <string>
#include <string_view>
#include <variant>

#include "charge_request.hpp"
#include "fuzz_check.hpp"

namespace charge_outbox::fuzz {

inline bool Printable(std::string_view s) {
  return std::none_of(s.begin(), s.end(), [](char c) { return static_cast<unsigned char>(c) < 0x20 || c == 0x7f; });
}

// Parses `body`; when accepted, checks every field rule, then that the request written back as JSON
// parses to the same request with the same fingerprint (what is stored is what was fingerprinted).
inline void CheckChargeRequest(std::string_view body) {
  using namespace charge_outbox::charge_api;
  const auto parsed = ParseChargeRequest(body);
  if (const auto* error = std::get_if<FieldError>(&parsed)) {
    FUZZ_CHECK(!error->problem.empty());  // the field may be "": an unknown member can have an empty name
    return;
  }
  const auto& r = std::get<ChargeRequest>(parsed);
  FUZZ_CHECK(r.amount > 0 && r.amount <= kMaxAmount);
  FUZZ_CHECK(IsIso4217Currency(r.currency));
  // Lengths in characters, as docs/openapi.yaml's maxLength counts them; payment_method printable ASCII.
  FUZZ_CHECK(!r.order_id.empty() && CharacterCount(r.order_id) <= kMaxIdentifierLength && Printable(r.order_id));
  FUZZ_CHECK(!r.payment_method.empty() && r.payment_method.size() <= kMaxIdentifierLength &&
             Printable(r.payment_method) &&
             std::all_of(r.payment_method.begin(), r.payment_method.end(),
                         [](char c) { return static_cast<unsigned char>(c) <= 0x7e; }));
  if (r.description) {
    FUZZ_CHECK(CharacterCount(*r.description) <= kMaxDescriptionLength);
    FUZZ_CHECK(r.description->find('\0') == std::string::npos);  // PostgreSQL text cannot hold it
  }

  boost::json::object again{{"amount", r.amount},
                            {"currency", r.currency},
                            {"order_id", r.order_id},
                            {"payment_method", r.payment_method}};
  if (r.description) again["description"] = *r.description;
  const auto reparsed = ParseChargeRequest(boost::json::serialize(again));
  FUZZ_CHECK(std::holds_alternative<ChargeRequest>(reparsed));
  const auto& r2 = std::get<ChargeRequest>(reparsed);
  FUZZ_CHECK(r2.amount == r.amount && r2.currency == r.currency && r2.order_id == r.order_id &&
             r2.payment_method == r.payment_method && r2.description == r.description);
  FUZZ_CHECK(RequestFingerprint(r2) == RequestFingerprint(r));
}

}  // namespace charge_outbox::fuzz
