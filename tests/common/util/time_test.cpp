#include "charge_outbox/util/time.hpp"

#include <gtest/gtest.h>

#include <limits>

namespace charge_outbox::util {
namespace {

using std::chrono::system_clock;

TEST(FormatRfc3339, MillisecondsInUtc) {
  EXPECT_EQ(FormatRfc3339Micros(1'796'083'200'123'456), "2026-12-01T00:00:00.123Z");
  EXPECT_EQ(FormatRfc3339(FromUnixMicros(1'796'083'200'123'456)), "2026-12-01T00:00:00.123Z");
}

// Found by fuzz/ (event_message): ce_time went through the clock, which counts nanoseconds, so a
// created_at outside the years 1678 to 2261 (PostgreSQL holds 4713 BC to 294276 AD) overflowed; and an
// instant before 1970 was truncated toward zero instead of floored. ce_time must be what the database's
// rfc3339() prints for the same instant.
TEST(FormatRfc3339, EveryYearTheDatabaseWritesAsItsRfc3339Does) {
  EXPECT_EQ(FormatRfc3339Micros(-62'135'596'800'000'000), "0001-01-01T00:00:00.000Z");
  EXPECT_EQ(FormatRfc3339Micros(253'402'300'799'999'999), "9999-12-31T23:59:59.999Z");
  EXPECT_EQ(FormatRfc3339Micros(9'214'646'400'000'000), "2262-01-01T00:00:00.000Z");
  EXPECT_EQ(FormatRfc3339Micros(-1), "1969-12-31T23:59:59.999Z");
  EXPECT_EQ(FormatRfc3339Micros(-1'500), "1969-12-31T23:59:59.998Z");
  EXPECT_EQ(FormatRfc3339(FromUnixMicros(-1'000)), "1969-12-31T23:59:59.999Z");
}

TEST(FromUnixMicros, SaturatesBeyondTheClocksRange) {
  EXPECT_EQ(FromUnixMicros(std::numeric_limits<std::int64_t>::max()), system_clock::time_point::max());
  EXPECT_EQ(FromUnixMicros(253'402'300'799'999'999), system_clock::time_point::max());
  EXPECT_EQ(FromUnixMicros(std::numeric_limits<std::int64_t>::min()), system_clock::time_point::min());
  EXPECT_EQ(ToUnixMicros(FromUnixMicros(1'796'083'200'123'456)), 1'796'083'200'123'456);
}

}  // namespace
}  // namespace charge_outbox::util
