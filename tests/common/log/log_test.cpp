#include "charge_outbox/log/log.hpp"

#include <gtest/gtest.h>

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

}  // namespace
}  // namespace charge_outbox::log
