#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "migrate_app.hpp"

namespace charge_outbox::migrate {
namespace {

using ::testing::HasSubstr;

TEST(ParseCommandLine, AcceptsCommandAndOptions) {
  const auto cli = ParseCommandLine({"up", "--migrations-dir", "/sql"});
  EXPECT_EQ(cli.command, "up");
  EXPECT_EQ(cli.migrations_dir, "/sql");
  EXPECT_EQ(ParseCommandLine({"status"}).migrations_dir, "");
}

TEST(ParseCommandLine, RefusesMissingOrUnknownCommand) {
  EXPECT_THROW(ParseCommandLine({}), config::ConfigError);
  EXPECT_THROW(ParseCommandLine({"down"}), config::ConfigError);
  EXPECT_THROW(ParseCommandLine({"up", "status"}), config::ConfigError);
  EXPECT_THROW(ParseCommandLine({"up", "--migrations-dir"}), config::ConfigError);
  // --config is app::ParseCommandLine's, taken out before this parser sees the rest.
  EXPECT_THROW(ParseCommandLine({"--config", "/etc/m.yaml", "up"}), config::ConfigError);
}

TEST(LoadConfig, ReadsDatabaseUrlFromEnvironmentAndDefaults) {
  auto reader = config::ConfigReader::FromString("migrate:\n  lock_timeout: 5s\n", [](const std::string& name) {
    return name == "DATABASE_URL" ? std::optional<std::string>("postgresql://db") : std::nullopt;
  });
  const auto c = LoadConfig(reader);
  EXPECT_EQ(c.database_url, "postgresql://db");
  EXPECT_EQ(c.lock_timeout, std::chrono::seconds{5});
  EXPECT_EQ(c.log_level, "info");
}

}  // namespace
}  // namespace charge_outbox::migrate
