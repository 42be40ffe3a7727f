#include "stripe_requests.hpp"

#include <boost/json/array.hpp>
#include <boost/json/serialize.hpp>
#include <algorithm>
#include <charconv>

#include "request_validation.hpp"

namespace charge_outbox::acquirer_sim {
namespace {

constexpr std::size_t kMaxText = 255;
constexpr std::size_t kMaxLimit = 100;
constexpr std::string_view kSearchPagePrefix = "page_";

int HexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

std::optional<std::string> Decode(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (std::size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (c == '+') {
      out += ' ';
    } else if (c == '%') {
      if (i + 2 >= text.size()) return std::nullopt;
      const int high = HexValue(text[i + 1]);
      const int low = HexValue(text[i + 2]);
      if (high < 0 || low < 0) return std::nullopt;
      out += static_cast<char>(high * 16 + low);
      i += 2;
    } else {
      out += c;
    }
  }
  return out;
}

StripeParamError Unknown(const std::string& name) {
  return {"parameter_unknown", name, "Received unknown parameter: " + name};
}
StripeParamError Missing(const std::string& name) {
  return {"parameter_missing", name, "Missing required param: " + name + "."};
}
StripeParamError Invalid(const std::string& name, const std::string& why) {
  return {"parameter_invalid", name, "Invalid " + name + ": " + why};
}
StripeParamError InvalidInteger(const std::string& name) {
  return {"parameter_invalid_integer", name, "Invalid integer: " + name};
}
StripeParamError Repeated(const std::string& name) {
  return {"parameter_invalid", name, "Received " + name + " more than once."};
}

std::optional<std::int64_t> Integer(std::string_view text) {
  std::int64_t value = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc{} || end != text.data() + text.size() || text.empty()) return std::nullopt;
  return value;
}

// A scalar parameter may be given once.
bool TakeOnce(const std::string& name, const std::string& value, std::optional<std::string>& slot,
              std::optional<StripeParamError>& error) {
  if (slot.has_value()) {
    error = Repeated(name);
    return false;
  }
  slot = value;
  return true;
}

std::optional<StripeParamError> ReadLimit(const std::optional<std::string>& text, std::size_t& out) {
  if (!text) return std::nullopt;
  const auto n = Integer(*text);
  if (!n) return InvalidInteger("limit");
  if (*n < 1 || *n > static_cast<std::int64_t>(kMaxLimit)) return Invalid("limit", "must be from 1 to 100");
  out = static_cast<std::size_t>(*n);
  return std::nullopt;
}

// created[gte|gt|lt|lte], in Unix seconds; true if `name` was one of them.
bool ReadCreated(const std::string& name, const std::string& value, CreatedRange& range,
                 std::optional<StripeParamError>& error) {
  constexpr std::int64_t kMicros = 1'000'000;
  constexpr std::int64_t kMaxSeconds = 253'402'300'799;  // 9999-12-31
  std::string_view bound;
  if (name == "created[gte]") bound = "gte";
  else if (name == "created[gt]") bound = "gt";
  else if (name == "created[lt]") bound = "lt";
  else if (name == "created[lte]") bound = "lte";
  else return false;
  const auto seconds = Integer(value);
  if (!seconds || *seconds < 0 || *seconds > kMaxSeconds) {
    error = InvalidInteger(name);
    return true;
  }
  if (bound == "gte") range.from_us = std::max(range.from_us, *seconds * kMicros);
  if (bound == "gt") range.from_us = std::max(range.from_us, (*seconds + 1) * kMicros);
  if (bound == "lt") range.to_us = std::min(range.to_us, *seconds * kMicros);
  if (bound == "lte") range.to_us = std::min(range.to_us, (*seconds + 1) * kMicros);
  return true;
}

// expand[] values: only `allowed` may be expanded.
std::optional<StripeParamError> ReadExpand(const std::string& value, std::string_view allowed, bool& out) {
  if (value != allowed) {
    return StripeParamError{"parameter_invalid", "expand", "This property cannot be expanded (" + value + ")."};
  }
  out = true;
  return std::nullopt;
}

bool IsText(const std::string& value) { return !value.empty() && value.size() <= kMaxText; }

}  // namespace

std::optional<FormParams> ParseForm(std::string_view text) {
  FormParams params;
  while (!text.empty()) {
    const auto amp = text.find('&');
    const std::string_view pair = text.substr(0, amp);
    text = amp == std::string_view::npos ? std::string_view{} : text.substr(amp + 1);
    if (pair.empty()) continue;
    const auto eq = pair.find('=');
    if (eq == std::string_view::npos) return std::nullopt;
    auto name = Decode(pair.substr(0, eq));
    auto value = Decode(pair.substr(eq + 1));
    if (!name || !value || name->empty()) return std::nullopt;
    params.emplace_back(std::move(*name), std::move(*value));
  }
  return params;
}

std::string CanonicalParams(std::string_view route, FormParams params) {
  std::ranges::stable_sort(params, {}, &std::pair<std::string, std::string>::first);
  boost::json::array canonical;
  canonical.emplace_back(route);
  for (const auto& [name, value] : params) canonical.emplace_back(boost::json::array{name, value});
  return boost::json::serialize(canonical);
}

StripeParsed<IntentCreate> ParseIntentCreate(const FormParams& params) {
  IntentCreate out;
  std::optional<std::string> amount, currency, payment_method, confirm, off_session, charge_id;
  std::optional<StripeParamError> error;
  for (const auto& [name, value] : params) {
    if (name == "amount") TakeOnce(name, value, amount, error);
    else if (name == "currency") TakeOnce(name, value, currency, error);
    else if (name == "payment_method") TakeOnce(name, value, payment_method, error);
    else if (name == "confirm") TakeOnce(name, value, confirm, error);
    else if (name == "off_session") TakeOnce(name, value, off_session, error);
    else if (name == "metadata[charge_id]") TakeOnce(name, value, charge_id, error);
    else if (name.starts_with("metadata[") && name.ends_with("]") && name.size() > 10) continue;
    else if (name == "payment_method_types[]") {
      if (value != "card") error = Invalid(name, "the simulator supports card only");
    } else if (name == "expand[]") {
      error = ReadExpand(value, "latest_charge", out.expand_latest_charge);
    } else {
      return Unknown(name);
    }
    if (error) return *error;
  }
  if (!amount) return Missing("amount");
  const auto n = Integer(*amount);
  if (!n || *n <= 0) return InvalidInteger("amount");
  out.request.amount = *n;
  if (!currency) return Missing("currency");
  if (currency->size() != 3 || !std::ranges::all_of(*currency, [](char c) { return c >= 'a' && c <= 'z'; })) {
    return Invalid("currency", "must be an ISO currency code of three lower-case letters");
  }
  std::ranges::transform(*currency, std::back_inserter(out.request.currency),
                         [](char c) { return static_cast<char>(c - 'a' + 'A'); });
  if (!payment_method) return Missing("payment_method");
  if (!IsText(*payment_method)) return Invalid("payment_method", "must be 1 to 255 characters");
  out.request.payment_method = *payment_method;
  if (!confirm) return Missing("confirm");
  if (*confirm != "true") return Invalid("confirm", "the simulator supports confirm=true only");
  if (off_session && *off_session != "true" && *off_session != "false") {
    return Invalid("off_session", "must be true or false");
  }
  if (!charge_id) return Missing("metadata[charge_id]");
  if (!IsText(*charge_id)) return Invalid("metadata[charge_id]", "must be 1 to 255 characters");
  out.request.reference = *charge_id;
  return out;
}

StripeParsed<RefundCreate> ParseRefundCreate(const FormParams& params) {
  RefundCreate out;
  std::optional<std::string> payment_intent, amount, reason;
  std::optional<StripeParamError> error;
  for (const auto& [name, value] : params) {
    if (name == "payment_intent") TakeOnce(name, value, payment_intent, error);
    else if (name == "amount") TakeOnce(name, value, amount, error);
    else if (name == "reason") TakeOnce(name, value, reason, error);
    else if (name.starts_with("metadata[") && name.ends_with("]") && name.size() > 10) {
      out.metadata[name.substr(9, name.size() - 10)] = value;
    } else {
      return Unknown(name);
    }
    if (error) return *error;
  }
  if (!payment_intent) return Missing("payment_intent");
  if (!IsText(*payment_intent)) return Invalid("payment_intent", "must be 1 to 255 characters");
  out.payment_intent = *payment_intent;
  if (amount) {
    const auto n = Integer(*amount);
    if (!n || *n <= 0) return InvalidInteger("amount");
    out.amount = *n;
  }
  if (reason) {
    if (*reason != "duplicate" && *reason != "fraudulent" && *reason != "requested_by_customer") {
      return Invalid("reason", "must be one of duplicate, fraudulent, requested_by_customer");
    }
    out.reason = *reason;
  }
  return out;
}

StripeParsed<IntentRetrieve> ParseIntentRetrieve(const FormParams& params) {
  IntentRetrieve out;
  for (const auto& [name, value] : params) {
    if (name != "expand[]") return Unknown(name);
    if (auto error = ReadExpand(value, "latest_charge", out.expand_latest_charge)) return *error;
  }
  return out;
}

std::string SearchPageToken(std::size_t offset) { return std::string(kSearchPagePrefix) + std::to_string(offset); }

std::optional<std::string> ParseChargeIdQuery(std::string_view query) {
  const auto trimmed_start = query.find_first_not_of(' ');
  if (trimmed_start == std::string_view::npos) return std::nullopt;
  query = query.substr(trimmed_start, query.find_last_not_of(' ') - trimmed_start + 1);
  for (const std::string_view field : {"metadata['charge_id']:", "metadata[\"charge_id\"]:"}) {
    if (!query.starts_with(field)) continue;
    std::string_view rest = query.substr(field.size());
    if (rest.size() < 2 || (rest.front() != '\'' && rest.front() != '"')) return std::nullopt;
    const char quote = rest.front();
    std::string value;
    for (std::size_t i = 1; i < rest.size(); ++i) {
      const char c = rest[i];
      if (c == '\\' && i + 1 < rest.size()) {
        value += rest[++i];
      } else if (c == quote) {
        if (i + 1 != rest.size() || value.empty()) return std::nullopt;  // nothing may follow the value
        return value;
      } else {
        value += c;
      }
    }
    return std::nullopt;
  }
  return std::nullopt;
}

StripeParsed<IntentSearch> ParseIntentSearch(const FormParams& params) {
  IntentSearch out;
  std::optional<std::string> query, limit, page;
  std::optional<StripeParamError> error;
  for (const auto& [name, value] : params) {
    if (name == "query") TakeOnce(name, value, query, error);
    else if (name == "limit") TakeOnce(name, value, limit, error);
    else if (name == "page") TakeOnce(name, value, page, error);
    else if (name == "expand[]") error = ReadExpand(value, "data.latest_charge", out.expand_latest_charge);
    else return Unknown(name);
    if (error) return *error;
  }
  if (!query) return Missing("query");
  auto charge_id = ParseChargeIdQuery(*query);
  if (!charge_id) {
    return StripeParamError{"parameter_invalid", "query",
                            "The simulator's search understands only metadata['charge_id']:'<value>'; got: " + *query};
  }
  out.charge_id = std::move(*charge_id);
  if (auto e = ReadLimit(limit, out.limit)) return *e;
  if (page) {
    const std::string_view token = *page;
    const auto offset =
        token.starts_with(kSearchPagePrefix) ? Integer(token.substr(kSearchPagePrefix.size())) : std::nullopt;
    if (!offset || *offset < 0) return Invalid("page", "not a next_page this API returned");
    out.offset = static_cast<std::size_t>(*offset);
  }
  return out;
}

StripeParsed<IntentList> ParseIntentList(const FormParams& params) {
  IntentList out;
  std::optional<std::string> limit, starting_after;
  std::optional<StripeParamError> error;
  for (const auto& [name, value] : params) {
    if (ReadCreated(name, value, out.created, error)) {
    } else if (name == "limit") TakeOnce(name, value, limit, error);
    else if (name == "starting_after") TakeOnce(name, value, starting_after, error);
    else if (name == "expand[]") error = ReadExpand(value, "data.latest_charge", out.expand_latest_charge);
    else return Unknown(name);
    if (error) return *error;
  }
  if (auto e = ReadLimit(limit, out.limit)) return *e;
  if (starting_after) {
    if (starting_after->empty()) return Invalid("starting_after", "must not be empty");
    out.starting_after = *starting_after;
  }
  return out;
}

StripeParsed<EventList> ParseEventList(const FormParams& params) {
  EventList out;
  std::optional<std::string> limit, starting_after, type;
  std::optional<StripeParamError> error;
  const auto read_type = [&](const std::string& name, const std::string& value) {
    for (const auto t : {StripeEventType::kPaymentIntentSucceeded, StripeEventType::kPaymentIntentPaymentFailed,
                         StripeEventType::kChargeRefunded}) {
      if (value == ToString(t)) {
        out.types.push_back(t);
        return;
      }
    }
    // A type the simulator never writes matches nothing, as at Stripe; it is not an error.
    if (value.empty()) error = Invalid(name, "must not be empty");
  };
  bool has_unwritten_type = false;
  for (const auto& [name, value] : params) {
    if (ReadCreated(name, value, out.created, error)) {
    } else if (name == "limit") TakeOnce(name, value, limit, error);
    else if (name == "starting_after") TakeOnce(name, value, starting_after, error);
    else if (name == "type") {
      if (TakeOnce(name, value, type, error)) {
        const auto before = out.types.size();
        read_type(name, value);
        has_unwritten_type |= out.types.size() == before;
      }
    } else if (name == "types[]") {
      const auto before = out.types.size();
      read_type(name, value);
      has_unwritten_type |= out.types.size() == before;
    } else {
      return Unknown(name);
    }
    if (error) return *error;
  }
  const bool has_types = std::ranges::any_of(params, [](const auto& param) { return param.first == "types[]"; });
  if (type && has_types) {
    return Invalid("type", "type and types[] cannot be combined");
  }
  // Only types the simulator never writes: nothing can match (an empty `types` would mean all).
  out.matches_nothing = out.types.empty() && has_unwritten_type;
  if (auto e = ReadLimit(limit, out.limit)) return *e;
  if (starting_after) {
    if (starting_after->empty()) return Invalid("starting_after", "must not be empty");
    out.starting_after = *starting_after;
  }
  return out;
}

}  // namespace charge_outbox::acquirer_sim
