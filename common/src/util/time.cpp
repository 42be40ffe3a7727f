#include "charge_outbox/util/time.hpp"

#include <cstdio>
#include <optional>
#include <string_view>
#include <ctime>

namespace charge_outbox::util {
namespace {

std::optional<int> Digits(std::string_view text, std::size_t pos, std::size_t count) {
  if (pos + count > text.size()) return std::nullopt;
  int value = 0;
  for (std::size_t i = pos; i < pos + count; ++i) {
    if (text[i] < '0' || text[i] > '9') return std::nullopt;
    value = value * 10 + (text[i] - '0');
  }
  return value;
}

}  // namespace


std::string FormatRfc3339(std::chrono::system_clock::time_point t) { return FormatRfc3339Micros(ToUnixMicros(t)); }

std::string FormatRfc3339Micros(std::int64_t micros) {
  // Floor division: an instant before 1970 belongs to the second and millisecond that began before it.
  const auto floor_div = [](std::int64_t a, std::int64_t b) { return a / b - (a % b < 0 ? 1 : 0); };
  const std::int64_t ms = floor_div(micros, 1000);
  const auto secs = static_cast<std::time_t>(floor_div(ms, 1000));
  std::tm utc{};
  gmtime_r(&secs, &utc);
  char buf[48];
  const int n = std::snprintf(buf, sizeof buf, "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", utc.tm_year + 1900,
                              utc.tm_mon + 1, utc.tm_mday, utc.tm_hour, utc.tm_min, utc.tm_sec,
                              static_cast<int>(ms - floor_div(ms, 1000) * 1000));
  return std::string(buf, static_cast<std::size_t>(n));
}

std::int64_t ToUnixMicros(std::chrono::system_clock::time_point t) {
  return std::chrono::duration_cast<std::chrono::microseconds>(t.time_since_epoch()).count();
}

std::chrono::system_clock::time_point FromUnixMicros(std::int64_t micros) {
  using std::chrono::system_clock;
  constexpr auto kFirst = std::chrono::ceil<std::chrono::microseconds>(system_clock::duration::min()).count();
  constexpr auto kLast = std::chrono::floor<std::chrono::microseconds>(system_clock::duration::max()).count();
  if (micros < kFirst) return system_clock::time_point::min();
  if (micros > kLast) return system_clock::time_point::max();
  return system_clock::time_point{
      std::chrono::duration_cast<system_clock::duration>(std::chrono::microseconds{micros})};
}

std::optional<std::chrono::system_clock::time_point> ParseRfc3339(std::string_view t) {
  using namespace std::chrono;
  // 2026-11-30T02:00:00 is 19 characters, then an optional fraction, then the offset.
  if (t.size() < 20 || t[4] != '-' || t[7] != '-' || (t[10] != 'T' && t[10] != 't') || t[13] != ':' ||
      t[16] != ':') {
    return std::nullopt;
  }
  const auto year = Digits(t, 0, 4), month = Digits(t, 5, 2), day = Digits(t, 8, 2);
  const auto hour = Digits(t, 11, 2), minute = Digits(t, 14, 2), second = Digits(t, 17, 2);
  if (!year || !month || !day || !hour || !minute || !second || *hour > 23 || *minute > 59 || *second > 59) {
    return std::nullopt;
  }
  const year_month_day date{std::chrono::year{*year}, std::chrono::month{static_cast<unsigned>(*month)},
                            std::chrono::day{static_cast<unsigned>(*day)}};
  if (!date.ok()) return std::nullopt;
  std::size_t pos = 19;
  microseconds fraction{0};
  if (t[pos] == '.') {
    ++pos;
    std::int64_t scale = 100000;
    const auto start = pos;
    while (pos < t.size() && t[pos] >= '0' && t[pos] <= '9') {
      fraction += microseconds{(t[pos] - '0') * scale};
      scale /= 10;
      ++pos;
    }
    if (pos == start) return std::nullopt;
  }
  minutes offset{0};
  if (pos == t.size() - 1 && (t[pos] == 'Z' || t[pos] == 'z')) {
    // UTC
  } else if (pos + 6 == t.size() && (t[pos] == '+' || t[pos] == '-') && t[pos + 3] == ':') {
    const auto oh = Digits(t, pos + 1, 2), om = Digits(t, pos + 4, 2);
    if (!oh || !om || *oh > 23 || *om > 59) return std::nullopt;
    offset = hours{*oh} + minutes{*om};
    if (t[pos] == '-') offset = -offset;
  } else {
    return std::nullopt;
  }
  const auto local = sys_days{date} + hours{*hour} + minutes{*minute} + seconds{*second} + fraction;
  return time_point_cast<system_clock::duration>(local - offset);
}

}  // namespace charge_outbox::util
