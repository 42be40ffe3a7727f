#include "charge_outbox/acquirer/classifier.hpp"

#include "classify_support.hpp"

#include <boost/json/parse.hpp>
#include <boost/json/parse_options.hpp>
#include <boost/json/value.hpp>

#include <algorithm>
#include <array>
#include <cctype>
#include <charconv>
#include <limits>

namespace charge_outbox::acquirer {
namespace {

namespace json = boost::json;
using std::chrono::system_clock;

bool EqualsIgnoreCase(std::string_view a, std::string_view b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
           return std::tolower(static_cast<unsigned char>(x)) == std::tolower(static_cast<unsigned char>(y));
         });
}

std::string_view TrimOws(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

// ---- HTTP-date -------------------------------------------------------------------------------------

constexpr std::array<std::string_view, 7> kShortDays = {"Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun"};
constexpr std::array<std::string_view, 7> kLongDays = {"Monday", "Tuesday", "Wednesday", "Thursday",
                                                       "Friday", "Saturday", "Sunday"};
constexpr std::array<std::string_view, 12> kMonths = {"Jan", "Feb", "Mar", "Apr", "May", "Jun",
                                                      "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"};

// A strict left-to-right reader: every method consumes on success and reports failure otherwise.
class DateReader {
 public:
  explicit DateReader(std::string_view text) : text_(text) {}

  bool Literal(std::string_view lit) {
    if (text_.substr(pos_, lit.size()) != lit) return false;
    pos_ += lit.size();
    return true;
  }
  template <std::size_t N>
  std::optional<int> OneOf(const std::array<std::string_view, N>& names) {
    for (std::size_t i = 0; i < N; ++i) {
      // Longest names first would matter only if one name prefixed another; none here does
      // once the following delimiter is checked by the caller.
      if (text_.substr(pos_, names[i].size()) == names[i]) {
        pos_ += names[i].size();
        return static_cast<int>(i);
      }
    }
    return std::nullopt;
  }
  std::optional<int> Digits(std::size_t count) {
    if (pos_ + count > text_.size()) return std::nullopt;
    int value = 0;
    for (std::size_t i = 0; i < count; ++i) {
      const char c = text_[pos_ + i];
      if (c < '0' || c > '9') return std::nullopt;
      value = value * 10 + (c - '0');
    }
    pos_ += count;
    return value;
  }
  // asctime's day: two digits, or a space and one digit.
  std::optional<int> PaddedDay() {
    if (Literal(" ")) return Digits(1);
    return Digits(2);
  }
  bool AtEnd() const { return pos_ == text_.size(); }

 private:
  std::string_view text_;
  std::size_t pos_ = 0;
};

struct TimeOfDay {
  int hour, minute, second;
};

std::optional<TimeOfDay> ReadTime(DateReader& r) {
  const auto h = r.Digits(2);
  if (!h || !r.Literal(":")) return std::nullopt;
  const auto m = r.Digits(2);
  if (!m || !r.Literal(":")) return std::nullopt;
  const auto s = r.Digits(2);
  if (!s || *h > 23 || *m > 59 || *s > 60) return std::nullopt;
  return TimeOfDay{*h, *m, *s};
}

std::optional<system_clock::time_point> Compose(int year, int month0, int day, TimeOfDay t) {
  const std::chrono::year_month_day ymd{std::chrono::year{year},
                                        std::chrono::month{static_cast<unsigned>(month0 + 1)},
                                        std::chrono::day{static_cast<unsigned>(day)}};
  if (!ymd.ok()) return std::nullopt;
  const std::chrono::sys_seconds date = std::chrono::sys_days{ymd} + std::chrono::hours{t.hour} +
                                        std::chrono::minutes{t.minute} + std::chrono::seconds{t.second};
  // The clock counts nanoseconds: it holds the years 1678 to 2261. A date beyond them is the clock's last
  // (or first) instant, as far as it can be, rather than a conversion that overflows into any date.
  if (date > std::chrono::floor<std::chrono::seconds>(system_clock::time_point::max())) {
    return system_clock::time_point::max();
  }
  if (date < std::chrono::ceil<std::chrono::seconds>(system_clock::time_point::min())) {
    return system_clock::time_point::min();
  }
  return date;
}

// What IMF-fixdate and RFC 850 share: "<weekday>, DD<sep>Mon<sep><year> HH:MM:SS GMT", with a year of
// `year_digits` digits, returned as written.
struct DayMonthYear {
  int day, month0, year;
  TimeOfDay time;
};

template <std::size_t N>
std::optional<DayMonthYear> ReadDayMonthYear(std::string_view text, const std::array<std::string_view, N>& weekdays,
                                             std::string_view separator, std::size_t year_digits) {
  DateReader r(text);
  if (!r.OneOf(weekdays) || !r.Literal(", ")) return std::nullopt;
  const auto day = r.Digits(2);
  if (!day || !r.Literal(separator)) return std::nullopt;
  const auto month = r.OneOf(kMonths);
  if (!month || !r.Literal(separator)) return std::nullopt;
  const auto year = r.Digits(year_digits);
  if (!year || !r.Literal(" ")) return std::nullopt;
  const auto time = ReadTime(r);
  if (!time || !r.Literal(" GMT") || !r.AtEnd()) return std::nullopt;
  return DayMonthYear{*day, *month, *year, *time};
}

// IMF-fixdate: "Sun, 06 Nov 1994 08:49:37 GMT"
std::optional<system_clock::time_point> ParseImfFixdate(std::string_view text) {
  const auto d = ReadDayMonthYear(text, kShortDays, " ", 4);
  if (!d) return std::nullopt;
  return Compose(d->year, d->month0, d->day, d->time);
}

// RFC 850: "Sunday, 06-Nov-94 08:49:37 GMT"
std::optional<system_clock::time_point> ParseRfc850(std::string_view text, system_clock::time_point now) {
  const auto d = ReadDayMonthYear(text, kLongDays, "-", 2);
  if (!d) return std::nullopt;
  // RFC 9110 section 5.6.7: a year more than 50 years ahead means the most recent past year with
  // those two digits.
  const int this_year = static_cast<int>(std::chrono::year_month_day{std::chrono::floor<std::chrono::days>(now)}.year());
  int year = this_year / 100 * 100 + d->year;
  if (year > this_year + 50) year -= 100;
  return Compose(year, d->month0, d->day, d->time);
}

// asctime: "Sun Nov  6 08:49:37 1994"
std::optional<system_clock::time_point> ParseAsctime(std::string_view text) {
  DateReader r(text);
  if (!r.OneOf(kShortDays) || !r.Literal(" ")) return std::nullopt;
  const auto month = r.OneOf(kMonths);
  if (!month || !r.Literal(" ")) return std::nullopt;
  const auto day = r.PaddedDay();
  if (!day || !r.Literal(" ")) return std::nullopt;
  const auto time = ReadTime(r);
  if (!time || !r.Literal(" ")) return std::nullopt;
  const auto year = r.Digits(4);
  if (!year || !r.AtEnd()) return std::nullopt;
  return Compose(*year, *month, *day, *time);
}

}  // namespace

// What the Stripe classifier shares (classify_support.hpp).
namespace detail {

// ---- JSON bodies -----------------------------------------------------------------------------------

std::optional<json::value> ParseJson(std::string_view body) {
  if (body.size() > kMaxJsonBodyBytes) return std::nullopt;
  json::parse_options options;
  options.max_depth = kMaxJsonDepth;
  boost::system::error_code ec;
  json::value value = json::parse(body, ec, json::storage_ptr(), options);
  if (ec) return std::nullopt;
  return value;
}

std::optional<std::string> NonEmptyString(const json::object& object, std::string_view key) {
  const auto* value = object.if_contains(key);
  if (value == nullptr || !value->is_string() || value->get_string().empty()) return std::nullopt;
  return std::string(value->get_string());
}

std::optional<std::int64_t> PositiveInteger(const json::object& object, std::string_view key) {
  const auto* value = object.if_contains(key);
  if (value == nullptr) return std::nullopt;
  if (value->is_int64() && value->get_int64() > 0) return value->get_int64();
  if (value->is_uint64() && value->get_uint64() > 0 &&
      value->get_uint64() <= static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max())) {
    return static_cast<std::int64_t>(value->get_uint64());
  }
  return std::nullopt;
}

std::optional<Capture> CaptureFromJson(const json::value& value) {
  const auto* object = value.if_object();
  if (object == nullptr) return std::nullopt;
  Capture capture;
  auto id = NonEmptyString(*object, "id");
  auto status = NonEmptyString(*object, "status");
  auto amount = PositiveInteger(*object, "amount");
  auto currency = NonEmptyString(*object, "currency");
  auto reference = NonEmptyString(*object, "reference");
  auto created_at = NonEmptyString(*object, "created_at");
  if (!id || !status || !amount || !currency || !reference || !created_at) return std::nullopt;
  if (*status == "captured") {
    capture.status = CaptureStatus::kCaptured;
  } else if (*status == "voided") {
    capture.status = CaptureStatus::kVoided;
  } else {
    return std::nullopt;
  }
  capture.id = std::move(*id);
  capture.amount = *amount;
  capture.currency = std::move(*currency);
  capture.reference = std::move(*reference);
  capture.created_at = std::move(*created_at);
  capture.idempotency_key = NonEmptyString(*object, "idempotency_key");
  return capture;
}

bool Matches(const Capture& capture, std::int64_t amount, std::string_view currency, std::string_view reference) {
  return capture.amount == amount && capture.currency == currency && capture.reference == reference;
}

// ---- classification --------------------------------------------------------------------------------

AttemptOutcome Start(Operation operation, const TransportResult& result, system_clock::time_point now) {
  AttemptOutcome outcome;
  outcome.operation = operation;
  outcome.transport = result.status;
  outcome.reused_connection = result.reused_connection;
  if (result.response.has_value()) {
    outcome.http_status = result.response->status;
    if (const auto retry_after = result.response->Header("Retry-After"); retry_after.has_value()) {
      outcome.retry_after = ParseRetryAfter(*retry_after, now);
    }
  }
  return outcome;
}

AttemptOutcome Finish(AttemptOutcome outcome, OutcomeKind kind, std::string_view why) {
  outcome.kind = kind;
  outcome.detail = std::string(ToString(outcome.operation)) + ": ";
  if (outcome.http_status.has_value()) {
    outcome.detail += "HTTP " + std::to_string(*outcome.http_status);
  } else {
    outcome.detail += ToString(outcome.transport);
  }
  if (!why.empty()) {
    outcome.detail += ": ";
    outcome.detail += why;
  }
  return outcome;
}

// Failures before a response. nullopt when a response arrived and the caller must look at it.
std::optional<AttemptOutcome> ClassifyTransportFailure(Operation operation, const TransportResult& result,
                                                       system_clock::time_point now) {
  auto outcome = Start(operation, result, now);
  switch (result.status) {
    case TransportStatus::kResponse:
      if (result.response.has_value()) return std::nullopt;
      return Finish(std::move(outcome), OutcomeKind::kUntrustedResponse, "no response recorded");
    case TransportStatus::kResolveFailed:
    case TransportStatus::kResolveTimedOut:
    case TransportStatus::kConnectRefused:
    case TransportStatus::kConnectTimedOut:
    case TransportStatus::kConnectFailed:
    case TransportStatus::kTlsFailed:
    case TransportStatus::kPoolTimedOut:
      return Finish(std::move(outcome), OutcomeKind::kNotSent, result.detail);
    // Some or all request bytes may have reached the acquirer, even on a pooled connection that turned
    // out dead: nothing proves the acquirer did not act, so these are unknown (retrying with the same
    // key is still safe).
    case TransportStatus::kWriteFailed:
    case TransportStatus::kConnectionDropped:
      return Finish(std::move(outcome), OutcomeKind::kConnectionDropped, result.detail);
    case TransportStatus::kSendTimedOut:
    case TransportStatus::kResponseTimedOut:
      return Finish(std::move(outcome), OutcomeKind::kTimedOut, result.detail);
    case TransportStatus::kResponseMalformed:
      return Finish(std::move(outcome), OutcomeKind::kUntrustedResponse, result.detail);
  }
  return Finish(std::move(outcome), OutcomeKind::kUntrustedResponse, "unrecognised transport status");
}

// Statuses every operation reads the same way. 2xx and 402 are the caller's; 404 too, for lookups.
AttemptOutcome ClassifyCommonStatus(AttemptOutcome outcome) {
  const int status = *outcome.http_status;
  if (status == 429) return Finish(std::move(outcome), OutcomeKind::kThrottled, "");
  if (status == 503) return Finish(std::move(outcome), OutcomeKind::kUnavailable, "");
  if (status == 409) return Finish(std::move(outcome), OutcomeKind::kInFlight, "same key still in flight");
  // 408: the acquirer gave up reading our request; what it did with it is as unknown as our own timeout.
  if (status == 408) return Finish(std::move(outcome), OutcomeKind::kTimedOut, "acquirer timed out");
  if (status >= 500 && status <= 599) return Finish(std::move(outcome), OutcomeKind::kServerError, "");
  if (status >= 200 && status <= 299) {
    return Finish(std::move(outcome), OutcomeKind::kUntrustedResponse, "success status outside the contract");
  }
  // 400, 401, 403, 404, 422, any other 4xx, 1xx and 3xx: the request or the configuration is wrong,
  // and the acquirer will answer the same way until someone fixes it.
  return Finish(std::move(outcome), OutcomeKind::kContractError, "");
}

}  // namespace detail

using detail::CaptureFromJson;
using detail::ClassifyCommonStatus;
using detail::ClassifyTransportFailure;
using detail::Finish;
using detail::Matches;
using detail::NonEmptyString;
using detail::ParseJson;
using detail::Start;

std::optional<std::string_view> HttpResponse::Header(std::string_view name) const {
  for (const auto& [field, value] : headers) {
    if (EqualsIgnoreCase(field, name)) return std::string_view(value);
  }
  return std::nullopt;
}

std::optional<system_clock::time_point> ParseHttpDate(std::string_view value, system_clock::time_point now) {
  if (auto t = ParseImfFixdate(value)) return t;
  if (auto t = ParseRfc850(value, now)) return t;
  return ParseAsctime(value);
}

std::optional<std::chrono::seconds> ParseRetryAfter(std::string_view value, system_clock::time_point now) {
  value = TrimOws(value);
  if (value.empty()) return std::nullopt;
  if (std::all_of(value.begin(), value.end(), [](char c) { return c >= '0' && c <= '9'; })) {
    std::uint64_t seconds = 0;
    const auto [ptr, ec] = std::from_chars(value.data(), value.data() + value.size(), seconds);
    // All digits, so the only possible failure is overflow: that is "very long" too.
    if (ec != std::errc{} || ptr != value.data() + value.size() ||
        seconds > static_cast<std::uint64_t>(kMaxRetryAfter.count())) {
      return kMaxRetryAfter;
    }
    return std::chrono::seconds{static_cast<std::int64_t>(seconds)};
  }
  const auto date = ParseHttpDate(value, now);
  if (!date.has_value()) return std::nullopt;
  if (*date <= now) return std::chrono::seconds{0};
  const auto wait = std::chrono::ceil<std::chrono::seconds>(*date - now);
  return std::min(wait, kMaxRetryAfter);
}

std::optional<Capture> ParseCaptureJson(std::string_view body) {
  const auto value = ParseJson(body);
  if (!value.has_value()) return std::nullopt;
  return CaptureFromJson(*value);
}

AttemptOutcome ClassifyCapture(const TransportResult& result, const CaptureRequest& sent,
                               system_clock::time_point now) {
  if (auto failed = ClassifyTransportFailure(Operation::kCapture, result, now)) return std::move(*failed);
  auto outcome = Start(Operation::kCapture, result, now);
  const auto& response = *result.response;
  // The contract says 201; a 200 carrying a capture that matches ours is the same evidence.
  if (response.status == 201 || response.status == 200) {
    auto capture = ParseCaptureJson(response.body);
    if (!capture.has_value()) {
      return Finish(std::move(outcome), OutcomeKind::kUntrustedResponse, "success status, unparseable capture body");
    }
    const bool ours = Matches(*capture, sent.amount, sent.currency, sent.reference);
    outcome.capture = std::move(capture);
    if (!ours) {
      return Finish(std::move(outcome), OutcomeKind::kMismatch, "capture differs in amount, currency or reference");
    }
    if (outcome.capture->status != CaptureStatus::kCaptured) {
      // Our key already names a capture that has been voided: the money moved and came back.
      return Finish(std::move(outcome), OutcomeKind::kMismatch, "capture for this key is voided");
    }
    return Finish(std::move(outcome), OutcomeKind::kCaptured, "");
  }
  if (response.status == 402) {
    const auto body = ParseJson(response.body);
    const auto* object = body.has_value() ? body->if_object() : nullptr;
    auto code = object != nullptr ? NonEmptyString(*object, "decline_code") : std::nullopt;
    if (!code.has_value()) {
      return Finish(std::move(outcome), OutcomeKind::kUntrustedResponse, "402 without a decline_code");
    }
    outcome.decline_code = std::move(code);
    return Finish(std::move(outcome), OutcomeKind::kDeclined, "");
  }
  return ClassifyCommonStatus(std::move(outcome));
}

AttemptOutcome ClassifyLookup(const TransportResult& result, const LookupRequest& sent,
                              system_clock::time_point now) {
  if (auto failed = ClassifyTransportFailure(Operation::kLookup, result, now)) return std::move(*failed);
  auto outcome = Start(Operation::kLookup, result, now);
  const auto& response = *result.response;
  if (response.status == 200) {
    auto capture = ParseCaptureJson(response.body);
    if (!capture.has_value()) {
      return Finish(std::move(outcome), OutcomeKind::kUntrustedResponse, "200 with an unparseable capture body");
    }
    const bool ours = !sent.expect.has_value() ||
                      Matches(*capture, sent.expect->amount, sent.expect->currency, sent.expect->reference);
    outcome.capture = std::move(capture);
    if (!ours) {
      return Finish(std::move(outcome), OutcomeKind::kMismatch, "capture differs in amount, currency or reference");
    }
    return Finish(std::move(outcome), OutcomeKind::kCaptured, "");
  }
  if (response.status == 404) return Finish(std::move(outcome), OutcomeKind::kNotFound, "no capture for this key");
  return ClassifyCommonStatus(std::move(outcome));
}

AttemptOutcome ClassifyVoid(const TransportResult& result, system_clock::time_point now) {
  if (auto failed = ClassifyTransportFailure(Operation::kVoid, result, now)) return std::move(*failed);
  auto outcome = Start(Operation::kVoid, result, now);
  const auto& response = *result.response;
  if (response.status == 200) {
    const auto body = ParseJson(response.body);
    const auto* object = body.has_value() ? body->if_object() : nullptr;
    const auto status = object != nullptr ? NonEmptyString(*object, "status") : std::nullopt;
    if (status != "voided") {
      return Finish(std::move(outcome), OutcomeKind::kUntrustedResponse, "200 without status voided");
    }
    return Finish(std::move(outcome), OutcomeKind::kVoided, "");
  }
  return ClassifyCommonStatus(std::move(outcome));
}

AttemptOutcome ClassifyListPage(const TransportResult& result, system_clock::time_point now) {
  if (auto failed = ClassifyTransportFailure(Operation::kList, result, now)) return std::move(*failed);
  auto outcome = Start(Operation::kList, result, now);
  const auto& response = *result.response;
  if (response.status != 200) return ClassifyCommonStatus(std::move(outcome));

  const auto body = ParseJson(response.body);
  const auto* object = body.has_value() ? body->if_object() : nullptr;
  const auto* data = object != nullptr ? object->if_contains("data") : nullptr;
  if (data == nullptr || !data->is_array()) {
    return Finish(std::move(outcome), OutcomeKind::kUntrustedResponse, "200 without a data array");
  }
  std::vector<Capture> page;
  page.reserve(data->get_array().size());
  for (const auto& entry : data->get_array()) {
    auto capture = CaptureFromJson(entry);
    // One bad entry makes the page untrusted: a reconciler must not conclude "absent" from a page it
    // could only partly read.
    if (!capture.has_value()) {
      return Finish(std::move(outcome), OutcomeKind::kUntrustedResponse, "page holds an unparseable capture");
    }
    page.push_back(std::move(*capture));
  }
  if (const auto* token = object->if_contains("next_page_token"); token != nullptr && !token->is_null()) {
    if (!token->is_string()) {
      return Finish(std::move(outcome), OutcomeKind::kUntrustedResponse, "next_page_token is not a string");
    }
    if (!token->get_string().empty()) outcome.next_page_token = std::string(token->get_string());
  }
  outcome.page = std::move(page);
  return Finish(std::move(outcome), OutcomeKind::kPage, "");
}

}  // namespace charge_outbox::acquirer
