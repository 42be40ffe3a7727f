#include "charge_request.hpp"

#include <boost/json/parse.hpp>
#include <boost/json/parse_options.hpp>
#include <boost/json/value.hpp>

#include <algorithm>
#include <array>
#include <cmath>

#include "charge_outbox/util/sha256.hpp"

namespace charge_outbox::charge_api {
namespace {

namespace json = boost::json;

// The currencies a card can be charged in: the active codes of ISO 4217 (list one), sorted, less those
// no money moves in: precious metals (XAU, XAG, XPD, XPT), bond-market units (XBA-XBD), SDRs and other
// units of account (XDR, XSU, XUA), the testing and "no currency" codes (XTS, XXX), and the fund codes
// (BOV, CHE, CHW, CLF, COU, MXV, USN, UYI, UYW).
constexpr std::array<std::string_view, 158> kCurrencies = {
    "AED", "AFN", "ALL", "AMD", "ANG", "AOA", "ARS", "AUD", "AWG", "AZN", "BAM", "BBD", "BDT", "BGN", "BHD",
    "BIF", "BMD", "BND", "BOB", "BRL", "BSD", "BTN", "BWP", "BYN", "BZD", "CAD", "CDF", "CHF", "CLP", "CNY",
    "COP", "CRC", "CUC", "CUP", "CVE", "CZK", "DJF", "DKK", "DOP", "DZD", "EGP", "ERN", "ETB", "EUR", "FJD",
    "FKP", "GBP", "GEL", "GHS", "GIP", "GMD", "GNF", "GTQ", "GYD", "HKD", "HNL", "HTG", "HUF", "IDR", "ILS",
    "INR", "IQD", "IRR", "ISK", "JMD", "JOD", "JPY", "KES", "KGS", "KHR", "KMF", "KPW", "KRW", "KWD", "KYD",
    "KZT", "LAK", "LBP", "LKR", "LRD", "LSL", "LYD", "MAD", "MDL", "MGA", "MKD", "MMK", "MNT", "MOP", "MRU",
    "MUR", "MVR", "MWK", "MXN", "MYR", "MZN", "NAD", "NGN", "NIO", "NOK", "NPR", "NZD", "OMR", "PAB", "PEN",
    "PGK", "PHP", "PKR", "PLN", "PYG", "QAR", "RON", "RSD", "RUB", "RWF", "SAR", "SBD", "SCR", "SDG", "SEK",
    "SGD", "SHP", "SLE", "SOS", "SRD", "SSP", "STN", "SVC", "SYP", "SZL", "THB", "TJS", "TMT", "TND", "TOP",
    "TRY", "TTD", "TWD", "TZS", "UAH", "UGX", "USD", "UYU", "UZS", "VED", "VES", "VND", "VUV", "WST", "XAF",
    "XCD", "XOF", "XPF", "YER", "ZAR", "ZMW", "ZWG", "ZWL"};

// Printable: no control characters (a token or an order id has no business carrying them).
bool HasControlCharacters(std::string_view s) {
  return std::any_of(s.begin(), s.end(), [](char c) { return static_cast<unsigned char>(c) < 0x20 || c == 0x7f; });
}

// Which characters a required string may hold (docs/openapi.yaml states each as a `pattern`).
enum class Charset {
  kText,        // any character but C0 controls and DEL
  kAsciiToken,  // printable ASCII (0x20-0x7E): an acquirer token, which the acquirer bounds in bytes
};

std::optional<FieldError> RequiredString(const json::object& o, std::string_view field, std::size_t max,
                                         Charset charset, std::string& out) {
  const auto* v = o.if_contains(field);
  if (v == nullptr) return FieldError{std::string(field), "is required"};
  if (!v->is_string()) return FieldError{std::string(field), "must be a string"};
  const auto& s = v->get_string();
  if (s.empty()) return FieldError{std::string(field), "must not be empty"};
  if (CharacterCount(s) > max) {
    return FieldError{std::string(field), "must be at most " + std::to_string(max) + " characters"};
  }
  if (HasControlCharacters(s)) return FieldError{std::string(field), "must not contain control characters"};
  if (charset == Charset::kAsciiToken &&
      std::any_of(s.begin(), s.end(), [](char c) { return static_cast<unsigned char>(c) > 0x7e; })) {
    return FieldError{std::string(field), "must be printable ASCII"};
  }
  out.assign(s.data(), s.size());
  return std::nullopt;
}

void AppendField(std::string& out, std::string_view value) {
  out += std::to_string(value.size());
  out += ':';
  out += value;
  out += '|';
}

}  // namespace

std::variant<ChargeRequest, FieldError> ParseChargeRequest(std::string_view body) {
  json::parse_options options;
  options.max_depth = 1;  // one object of scalar members; anything nested is not a charge
  json::value parsed;
  try {
    parsed = json::parse(body, {}, options);
  } catch (const std::exception&) {
    return FieldError{"body", "is not a JSON object of the documented fields (malformed or nested too deeply)"};
  }
  if (!parsed.is_object()) return FieldError{"body", "must be a JSON object"};
  const auto& o = parsed.get_object();
  for (const auto& member : o) {
    const auto key = member.key();
    if (key != "amount" && key != "currency" && key != "order_id" && key != "payment_method" &&
        key != "description") {
      return FieldError{std::string(key), "is not a known field"};
    }
  }

  ChargeRequest r;
  const auto* amount = o.if_contains("amount");
  if (amount == nullptr) return FieldError{"amount", "is required"};
  if (amount->is_int64()) {
    r.amount = amount->get_int64();
  } else if (amount->is_uint64()) {
    return FieldError{"amount", "must be at most " + std::to_string(kMaxAmount)};
  } else if (amount->is_double()) {
    // JSON Schema's integer (docs/openapi.yaml) is a number without a fraction, however it is written:
    // 649.0 and 6.49e2 are 649 (a Schemathesis run sends them). Every amount up to kMaxAmount is exact
    // in a double; anything past it is refused below before the conversion.
    const double d = amount->get_double();
    if (!std::isfinite(d) || std::trunc(d) != d) return FieldError{"amount", "must be an integer number of minor units"};
    if (d > static_cast<double>(kMaxAmount)) {
      return FieldError{"amount", "must be at most " + std::to_string(kMaxAmount)};
    }
    if (d < 1) return FieldError{"amount", "must be greater than 0"};
    r.amount = static_cast<std::int64_t>(d);
  } else {
    return FieldError{"amount", "must be an integer number of minor units"};
  }
  if (r.amount <= 0) return FieldError{"amount", "must be greater than 0"};
  if (r.amount > kMaxAmount) return FieldError{"amount", "must be at most " + std::to_string(kMaxAmount)};

  if (auto e = RequiredString(o, "currency", 3, Charset::kText, r.currency)) return *e;
  if (!IsIso4217Currency(r.currency)) {
    return FieldError{"currency", "must be an ISO 4217 code in upper case, such as BRL"};
  }
  if (auto e = RequiredString(o, "order_id", kMaxIdentifierLength, Charset::kText, r.order_id)) return *e;
  if (auto e = RequiredString(o, "payment_method", kMaxIdentifierLength, Charset::kAsciiToken, r.payment_method)) {
    return *e;
  }
  if (const auto* d = o.if_contains("description"); d != nullptr && !d->is_null()) {
    if (!d->is_string()) return FieldError{"description", "must be a string"};
    const auto& s = d->get_string();
    if (CharacterCount(s) > kMaxDescriptionLength) {
      return FieldError{"description", "must be at most " + std::to_string(kMaxDescriptionLength) + " characters"};
    }
    // Free text may span lines; other control characters, NUL above all (PostgreSQL text cannot hold it,
    // so the stored description would differ from the one fingerprinted), are refused.
    if (std::any_of(s.begin(), s.end(), [](char c) {
          return (static_cast<unsigned char>(c) < 0x20 && c != '\t' && c != '\n' && c != '\r') || c == 0x7f;
        })) {
      return FieldError{"description", "must not contain control characters other than tab and line breaks"};
    }
    r.description = std::string(s.data(), s.size());
  }
  return r;
}

std::size_t CharacterCount(std::string_view utf8) {
  return static_cast<std::size_t>(
      std::count_if(utf8.begin(), utf8.end(), [](char c) { return (static_cast<unsigned char>(c) & 0xC0) != 0x80; }));
}

bool IsValidIdempotencyKey(std::string_view key) {
  if (key.empty() || key.size() > 255) return false;
  return std::all_of(key.begin(), key.end(), [](char c) { return c >= 0x21 && c <= 0x7e; });
}

bool IsIso4217Currency(std::string_view code) {
  return std::binary_search(kCurrencies.begin(), kCurrencies.end(), code);
}

std::span<const std::string_view> AcceptedCurrencies() { return kCurrencies; }

charges::Fingerprint RequestFingerprint(const ChargeRequest& r) {
  // Length-prefixed fields: "a|bc" and "ab|c" can never encode alike.
  std::string canonical = "charge-v1|";
  AppendField(canonical, std::to_string(r.amount));
  AppendField(canonical, r.currency);
  AppendField(canonical, r.order_id);
  AppendField(canonical, r.payment_method);
  if (r.description) {
    canonical += "d";
    AppendField(canonical, *r.description);
  } else {
    canonical += "-|";
  }
  return util::Sha256(canonical);
}

}  // namespace charge_outbox::charge_api
