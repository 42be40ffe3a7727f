#include "charge_outbox/util/host.hpp"

#include <gtest/gtest.h>
#include <unistd.h>

#include <string>

namespace charge_outbox::util {
namespace {

TEST(HostName, IsTheMachinesNameAndHostAndProcessAddsThePid) {
  char expected[256] = {};
  ASSERT_EQ(::gethostname(expected, sizeof expected - 1), 0);
  EXPECT_EQ(HostName("fallback"), expected);
  EXPECT_EQ(HostAndProcess("fallback"), std::string(expected) + "-" + std::to_string(::getpid()));
}

}  // namespace
}  // namespace charge_outbox::util
