// Timestamps as the product writes them: RFC 3339, UTC, millisecond precision ("2026-11-30T02:53:00.367Z"),
// the same text as the database's rfc3339() function.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace charge_outbox::util {

std::string FormatRfc3339(std::chrono::system_clock::time_point t);
// RFC 3339 date-time: "YYYY-MM-DDTHH:MM:SS[.fraction](Z|+HH:MM|-HH:MM)", fractions kept to the microsecond;
// nullopt for anything else.
std::optional<std::chrono::system_clock::time_point> ParseRfc3339(std::string_view text);
// The same text for an instant given as microseconds since the epoch, as the database hands timestamps
// over: any year PostgreSQL can hold, without passing through the clock's narrower range.
std::string FormatRfc3339Micros(std::int64_t micros);

std::int64_t ToUnixMicros(std::chrono::system_clock::time_point t);
// The clock counts nanoseconds, so it holds the years 1677 to 2262; an instant outside them (PostgreSQL
// holds 4713 BC to 294276 AD) saturates to the clock's first or last instant instead of overflowing.
std::chrono::system_clock::time_point FromUnixMicros(std::int64_t micros);

}  // namespace charge_outbox::util
