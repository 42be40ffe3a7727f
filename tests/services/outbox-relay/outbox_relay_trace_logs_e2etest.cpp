// Issue 14, defect 6, the relay's side: a line about one event carries the trace id of the request or run
// that caused it (the event's stored traceparent, which its Kafka headers carry too); an event without
// one logs none.
#include <gtest/gtest.h>

#include <boost/json/parse.hpp>
#include <boost/json/serialize.hpp>

#include <optional>
#include <sstream>

#include "relay_fixture.hpp"
#include "test_env.hpp"

namespace charge_outbox::testing {
namespace {

using namespace std::chrono_literals;

constexpr const char* kTraceId = "0af7651916cd43dd8448eb211c80319c";

// The relay's JSON log line whose message contains `text`, if any.
std::optional<boost::json::object> LineWith(const std::string& output, const std::string& text) {
  std::istringstream in(output);
  for (std::string line; std::getline(in, line);) {
    if (line.empty() || line.front() != '{') continue;
    auto entry = boost::json::parse(line).as_object();
    if (std::string_view(entry.at("msg").as_string()).find(text) != std::string_view::npos) return entry;
  }
  return std::nullopt;
}

TEST(OutboxRelayTraceLogsE2E, AParkedEventIsLoggedUnderTheTraceOfTheRequestThatCausedIt) {
  RelayE2E fixture("relay_trace_logs");
  // Both over the relay's 100 kB limit: each is parked, with an error line about it.
  const auto traced = WriteEvent(fixture.db().url(), NewUuid(), 1, 200'000,
                                 std::string("00-") + kTraceId + "-b7ad6b7169203331-01");
  const auto untraced = WriteEvent(fixture.db().url(), NewUuid(), 1, 200'000);
  auto relay = fixture.StartRelay({{"KAFKA_MESSAGE_MAX_BYTES", "100000"}});
  const auto parked_line = [&](const WrittenEvent& e) { return LineWith(relay->Output(), "parked event " + e.id); };
  ASSERT_TRUE(Eventually([&] { return parked_line(traced) && parked_line(untraced); }, 20s)) << relay->Output();

  const auto traced_line = *parked_line(traced);
  ASSERT_TRUE(traced_line.contains("trace_id")) << boost::json::serialize(traced_line);
  EXPECT_EQ(traced_line.at("trace_id").as_string(), kTraceId);
  const auto untraced_line = *parked_line(untraced);
  EXPECT_FALSE(untraced_line.contains("trace_id")) << boost::json::serialize(untraced_line);
}

}  // namespace
}  // namespace charge_outbox::testing
