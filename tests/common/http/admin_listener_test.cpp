// The admin listener's bounds (admin.*, issue 44): the defaults that keep the kubelet's probes answered
// under a flood, an override from the environment, and a reserve that would lock every client to one
// connection refused at start.
#include "charge_outbox/http/admin_listener.hpp"

#include <gtest/gtest.h>

#include <map>
#include <optional>
#include <string>

namespace charge_outbox::http {
namespace {

using namespace std::chrono_literals;

ServerOptions Load(std::map<std::string, std::string> env) {
  auto reader = config::ConfigReader::FromString("", [env](const std::string& name) -> std::optional<std::string> {
    const auto found = env.find(name);
    return found == env.end() ? std::nullopt : std::optional<std::string>(found->second);
  });
  return LoadAdminServerOptions(reader);
}

TEST(AdminListener, DefaultsBoundEveryClientAndKeepConnectionsForNewcomers) {
  const auto admin = Load({});
  EXPECT_EQ(admin.address, "0.0.0.0");
  EXPECT_EQ(admin.port, 9090);
  EXPECT_EQ(admin.max_connections, 256u);
  EXPECT_EQ(admin.max_connections_per_client, 8u);
  EXPECT_EQ(admin.reserved_for_new_clients, 32u);
  EXPECT_EQ(admin.idle_timeout, 5s);
  EXPECT_EQ(admin.read_timeout, 5s);
  EXPECT_EQ(admin.body_limit, 1024u);
  EXPECT_EQ(ReadBufferLimit(admin), 8u * 1024 + 1024 + kReadBufferMargin);
}

TEST(AdminListener, TheEnvironmentOverridesEachBound) {
  const auto admin = Load({{"ADMIN_MAX_CONNECTIONS", "64"},
                           {"ADMIN_MAX_CONNECTIONS_PER_CLIENT", "0"},
                           {"ADMIN_RESERVED_CONNECTIONS", "4"},
                           {"ADMIN_IDLE_TIMEOUT", "2s"},
                           {"ADMIN_READ_TIMEOUT", "1500ms"}});
  EXPECT_EQ(admin.max_connections, 64u);
  EXPECT_EQ(admin.max_connections_per_client, 0u);
  EXPECT_EQ(admin.reserved_for_new_clients, 4u);
  EXPECT_EQ(admin.idle_timeout, 2s);
  EXPECT_EQ(admin.read_timeout, 1500ms);
}

TEST(AdminListener, AReserveAsLargeAsTheMaximumIsRefused) {
  try {
    Load({{"ADMIN_MAX_CONNECTIONS", "16"}, {"ADMIN_RESERVED_CONNECTIONS", "16"}});
    FAIL() << "expected a ConfigError";
  } catch (const config::ConfigError& e) {
    EXPECT_EQ(e.key(), "admin.reserved_connections");
  }
}

}  // namespace
}  // namespace charge_outbox::http
