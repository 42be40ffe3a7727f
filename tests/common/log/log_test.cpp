#include "charge_outbox/log/log.hpp"

#include <gtest/gtest.h>

#include "log_capture.hpp"

namespace charge_outbox::log {
namespace {

TEST(AppendJsonEscaped, EscapesQuotesBackslashesAndControlCharacters) {
  std::string out;
  AppendJsonEscaped("a\"b\\c\nd\te\x01", out);
  EXPECT_EQ(out, R"(a\"b\\c\nd\te\u0001)");
}

TEST(AppendJsonEscaped, LeavesUtf8Alone) {
  std::string out;
  AppendJsonEscaped("cobrança", out);
  EXPECT_EQ(out, "cobrança");
}

using testing::LogCapture;

TEST(WithTrace, TheLineCarriesTheGivenTraceIdAndTheThreadKeepsItsOwn) {
  LogCapture captured;
  {
    ScopedTraceId held("0000000000000000000000000000000a");
    WithTrace("0000000000000000000000000000000b", spdlog::level::warn, "charge {} is {}", "ch_1", "pending");
    spdlog::info("after");
  }
  spdlog::info("outside");
  const auto lines = captured.Lines();
  ASSERT_EQ(lines.size(), 3u);
  EXPECT_EQ(lines[0].at("msg").as_string(), "charge ch_1 is pending");
  EXPECT_EQ(lines[0].at("level").as_string(), "warn");
  EXPECT_EQ(LogCapture::TraceIdOf(lines[0]), "0000000000000000000000000000000b");
  EXPECT_EQ(LogCapture::TraceIdOf(lines[1]), "0000000000000000000000000000000a");
  EXPECT_EQ(LogCapture::TraceIdOf(lines[2]), "");
}

TEST(WithTrace, AnEmptyTraceIdLogsNoneRatherThanTheThreads) {
  LogCapture captured;
  ScopedTraceId held("0000000000000000000000000000000a");
  WithTrace("", spdlog::level::info, "no trace");
  const auto lines = captured.Lines();
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_FALSE(lines[0].contains("trace_id"));
}

TEST(TraceIdOf, ReadsATraceparentAndNothingFromAMalformedOne) {
  EXPECT_EQ(TraceIdOf("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"), "4bf92f3577b34da6a3ce929d0e0e4736");
  EXPECT_EQ(TraceIdOf(""), "");
  EXPECT_EQ(TraceIdOf("00-not-a-trace"), "");
}

}  // namespace
}  // namespace charge_outbox::log
