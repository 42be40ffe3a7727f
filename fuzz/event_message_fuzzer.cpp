// The Kafka message of a charge event, from any values the outbox row may hold: the relay's claim
// formats ce_time from created_at (common/src/outbox/pg/pg_outbox_store.cpp) and ToMessage
// (services/outbox-relay/src/relay_loop.cpp) builds the key, value and CloudEvents headers. The payload
// itself is built by PostgreSQL (charge_event_payload, sql/migrations) and travels as it is.
//
// Input: id, charge id, type, payload, traceparent, source and dataschema as libFuzzer's
// FuzzedDataProvider splits them (each ends at a lone backslash; "\\" is one backslash), then 8 bytes of
// created_at taken from the end, microseconds since the epoch, within PostgreSQL's timestamptz range.
#include <fuzzer/FuzzedDataProvider.h>

#include <chrono>
#include <cstdio>
#include <string>

#include "charge_outbox/util/time.hpp"
#include "fuzz_check.hpp"
#include "relay_loop.hpp"

namespace {

using namespace charge_outbox;
using namespace std::chrono;

// timestamptz holds 4713 BC to 294276 AD; the product writes years 1 to 9999 (to_char's YYYY, four digits).
constexpr std::int64_t kYear1Micros = -62'135'596'800'000'000;     // 0001-01-01T00:00:00Z
constexpr std::int64_t kYear10000Micros = 253'402'300'800'000'000;  // 10000-01-01T00:00:00Z

// What PostgreSQL's rfc3339() prints for the same instant, computed with the calendar of <chrono> in
// microseconds (no narrower clock in between): the relay and the database must agree on ce_time.
std::string Rfc3339Reference(std::int64_t micros) {
  const sys_time<milliseconds> t = floor<milliseconds>(sys_time<microseconds>(microseconds{micros}));
  const auto day = floor<days>(t);
  const year_month_day ymd{day};
  const hh_mm_ss hms{t - day};
  char buf[40];
  const int n = std::snprintf(buf, sizeof buf, "%04d-%02u-%02uT%02d:%02d:%02lld.%03lldZ", static_cast<int>(ymd.year()),
                              static_cast<unsigned>(ymd.month()), static_cast<unsigned>(ymd.day()),
                              static_cast<int>(hms.hours().count()), static_cast<int>(hms.minutes().count()),
                              static_cast<long long>(hms.seconds().count()),
                              static_cast<long long>(hms.subseconds().count()));
  return std::string(buf, static_cast<std::size_t>(n));
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  FuzzedDataProvider input(data, size);
  outbox::OutboxEvent event;
  event.id = input.ConsumeRandomLengthString();
  event.aggregateid = input.ConsumeRandomLengthString();
  event.type = input.ConsumeRandomLengthString();
  event.payload = input.ConsumeRandomLengthString();
  event.traceparent = input.ConsumeRandomLengthString();
  const std::string source = input.ConsumeRandomLengthString();
  const std::string dataschema = input.ConsumeRandomLengthString();
  event.created_at_us = input.ConsumeIntegralInRange<std::int64_t>(kYear1Micros, kYear10000Micros - 1);
  // As the claim does it.
  event.time = util::FormatRfc3339Micros(event.created_at_us);
  FUZZ_CHECK(event.time == Rfc3339Reference(event.created_at_us));

  const auto m = outbox_relay::ToMessage(event, source, dataschema);
  // Every byte as the row holds it: the charge id is the key (per-charge order), the payload the value.
  FUZZ_CHECK(m.key == event.aggregateid && m.value == event.payload);
  const std::pair<std::string_view, std::string_view> expected[] = {
      {"ce_specversion", "1.0"}, {"ce_id", event.id},     {"ce_source", source},
      {"ce_type", event.type},   {"ce_time", event.time}, {"ce_subject", event.aggregateid},
      {"ce_dataschema", dataschema}, {"content-type", "application/json"}};
  const std::size_t fixed = std::size(expected);
  FUZZ_CHECK(m.headers.size() == fixed + (event.traceparent.empty() ? 0 : 1));
  for (std::size_t i = 0; i < fixed; ++i) FUZZ_CHECK(m.headers[i] == expected[i]);
  if (!event.traceparent.empty()) {
    FUZZ_CHECK(m.headers[fixed].first == "traceparent" && m.headers[fixed].second == event.traceparent);
  }
  return 0;
}
