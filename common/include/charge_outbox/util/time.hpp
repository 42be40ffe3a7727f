// Timestamps as the product writes them: RFC 3339, UTC, millisecond precision ("2026-11-30T02:53:00.367Z"),
// the same text as the database's rfc3339() function.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>

namespace charge_outbox::util {

std::string FormatRfc3339(std::chrono::system_clock::time_point t);

std::int64_t ToUnixMicros(std::chrono::system_clock::time_point t);
std::chrono::system_clock::time_point FromUnixMicros(std::int64_t micros);

}  // namespace charge_outbox::util
