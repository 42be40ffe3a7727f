#include "charge_outbox/util/time.hpp"

#include <cstdio>
#include <ctime>

namespace charge_outbox::util {

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

}  // namespace charge_outbox::util
