#include "timestamp.hpp"

#include <chrono>
#include <cstdio>

namespace charge_outbox::acquirer_sim {
namespace {

constexpr std::int64_t kMicrosPerSecond = 1'000'000;
constexpr std::int64_t kSecondsPerDay = 86'400;

// Reads exactly `width` digits at `pos`.
std::optional<int> Digits(std::string_view text, std::size_t pos, std::size_t width) {
  if (pos + width > text.size()) return std::nullopt;
  int value = 0;
  for (std::size_t i = pos; i < pos + width; ++i) {
    const char c = text[i];
    if (c < '0' || c > '9') return std::nullopt;
    value = value * 10 + (c - '0');
  }
  return value;
}

}  // namespace

TimestampText::TimestampText(std::int64_t unix_micros) {
  using namespace std::chrono;
  std::int64_t days = unix_micros / (kSecondsPerDay * kMicrosPerSecond);
  std::int64_t rest = unix_micros % (kSecondsPerDay * kMicrosPerSecond);
  if (rest < 0) {
    rest += kSecondsPerDay * kMicrosPerSecond;
    --days;
  }
  const year_month_day date{sys_days{std::chrono::days{days}}};
  const auto seconds_of_day = rest / kMicrosPerSecond;
  const int n = std::snprintf(text_, sizeof text_, "%04d-%02u-%02uT%02d:%02d:%02d.%06dZ",
                              static_cast<int>(date.year()), static_cast<unsigned>(date.month()),
                              static_cast<unsigned>(date.day()), static_cast<int>(seconds_of_day / 3600),
                              static_cast<int>(seconds_of_day / 60 % 60), static_cast<int>(seconds_of_day % 60),
                              static_cast<int>(rest % kMicrosPerSecond));
  size_ = static_cast<std::size_t>(n);
}

std::string FormatTimestamp(std::int64_t unix_micros) { return std::string(TimestampText(unix_micros).view()); }

std::optional<std::int64_t> ParseTimestamp(std::string_view text) {
  using namespace std::chrono;
  const auto y = Digits(text, 0, 4);
  const auto mo = Digits(text, 5, 2);
  const auto d = Digits(text, 8, 2);
  const auto h = Digits(text, 11, 2);
  const auto mi = Digits(text, 14, 2);
  const auto s = Digits(text, 17, 2);
  if (!y || !mo || !d || !h || !mi || !s || text[4] != '-' || text[7] != '-' ||
      (text[10] != 'T' && text[10] != 't') || text[13] != ':' || text[16] != ':') {
    return std::nullopt;
  }
  const year_month_day date{year{*y}, month{static_cast<unsigned>(*mo)}, day{static_cast<unsigned>(*d)}};
  // 60 is a leap second: accepted as RFC 3339 allows, counted as the next second's start.
  if (!date.ok() || *h > 23 || *mi > 59 || *s > 60) return std::nullopt;
  std::size_t pos = 19;
  std::int64_t fraction_micros = 0;
  if (pos < text.size() && text[pos] == '.') {
    ++pos;
    const std::size_t start = pos;
    std::int64_t scale = 100'000;
    while (pos < text.size() && text[pos] >= '0' && text[pos] <= '9') {
      fraction_micros += (text[pos] - '0') * scale;
      scale /= 10;
      ++pos;
    }
    if (pos == start) return std::nullopt;
  }
  std::int64_t offset_seconds = 0;
  if (pos < text.size() && (text[pos] == 'Z' || text[pos] == 'z')) {
    ++pos;
  } else if (pos < text.size() && (text[pos] == '+' || text[pos] == '-')) {
    const auto oh = Digits(text, pos + 1, 2);
    const auto om = Digits(text, pos + 4, 2);
    if (!oh || !om || pos + 3 >= text.size() || text[pos + 3] != ':' || *oh > 23 || *om > 59) return std::nullopt;
    offset_seconds = (text[pos] == '+' ? 1 : -1) * (*oh * 3600 + *om * 60);
    pos += 6;
  } else {
    return std::nullopt;
  }
  if (pos != text.size()) return std::nullopt;
  const std::int64_t days = sys_days{date}.time_since_epoch().count();
  const std::int64_t seconds = days * kSecondsPerDay + *h * 3600 + *mi * 60 + *s - offset_seconds;
  return seconds * kMicrosPerSecond + fraction_micros;
}

}  // namespace charge_outbox::acquirer_sim
