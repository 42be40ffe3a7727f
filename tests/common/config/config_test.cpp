#include "charge_outbox/config/config.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <map>

namespace charge_outbox::config {
namespace {

using ::testing::HasSubstr;

EnvLookup FakeEnv(std::map<std::string, std::string> vars) {
  return [vars = std::move(vars)](const std::string& name) -> std::optional<std::string> {
    const auto it = vars.find(name);
    if (it == vars.end()) return std::nullopt;
    return it->second;
  };
}

// Runs `read` and returns the ConfigError it throws; fails the test if it throws nothing.
template <typename F>
ConfigError ErrorOf(F&& read) {
  try {
    read();
  } catch (const ConfigError& e) {
    return e;
  }
  ADD_FAILURE() << "expected a ConfigError";
  return ConfigError("", "");
}

TEST(ConfigReader, ReadsNestedValuesOfEveryType) {
  auto r = ConfigReader::FromString(R"(
http:
  port: 8080
  enabled: true
  ratio: 0.25
  timeout: 250ms
  name: api
)", FakeEnv({}));
  EXPECT_EQ(r.Integer("http.port", std::nullopt, 1, 65535), 8080);
  EXPECT_TRUE(r.Boolean("http.enabled"));
  EXPECT_DOUBLE_EQ(r.Number("http.ratio", std::nullopt, 0, 1), 0.25);
  EXPECT_EQ(r.Duration("http.timeout", std::nullopt), std::chrono::milliseconds{250});
  EXPECT_EQ(r.String("http.name"), "api");
  EXPECT_NO_THROW(r.RejectUnknownKeys());
}

TEST(ConfigReader, EnvironmentOverridesTheFile) {
  auto r = ConfigReader::FromString("http:\n  port: 8080\n", FakeEnv({{"HTTP_PORT", "9090"}}));
  EXPECT_EQ(r.Integer("http.port", std::nullopt, 1, 65535), 9090);
}

TEST(ConfigReader, FallbackWhenAbsent) {
  auto r = ConfigReader::FromString("", FakeEnv({}));
  EXPECT_EQ(r.Integer("pool.size", 8, 1, 64), 8);
  EXPECT_EQ(r.Duration("grace", std::chrono::minutes{2}), std::chrono::minutes{2});
  EXPECT_EQ(r.String("log.level", "info"), "info");
}

TEST(ConfigReader, MissingRequiredKeyNamesKeyAndVariable) {
  auto r = ConfigReader::FromString("", FakeEnv({}));
  const auto e = ErrorOf([&] { r.Integer("http.port", std::nullopt, 1, 65535); });
  EXPECT_EQ(e.key(), "http.port");
  EXPECT_THAT(e.problem(), HasSubstr("HTTP_PORT"));
}

TEST(ConfigReader, ARenamedKeyIsRefusedNamingItsNewName) {
  auto from_file = ConfigReader::FromString("server:\n  port: 8080\n", FakeEnv({}));
  const auto e = ErrorOf([&] { from_file.Renamed("server.port", "http.port"); });
  EXPECT_EQ(e.key(), "server.port");
  EXPECT_THAT(e.problem(), HasSubstr("http.port"));
  EXPECT_THAT(e.problem(), HasSubstr("HTTP_PORT"));

  auto from_env = ConfigReader::FromString("", FakeEnv({{"SERVER_PORT", "8080"}}));
  EXPECT_THAT(ErrorOf([&] { from_env.Renamed("server.port", "http.port"); }).problem(), HasSubstr("SERVER_PORT"));

  auto absent = ConfigReader::FromString("http:\n  port: 8080\n", FakeEnv({}));
  EXPECT_NO_THROW(absent.Renamed("server.port", "http.port"));
}

TEST(ConfigReader, WronglyTypedValueNamesKeyAndValue) {
  auto r = ConfigReader::FromString("http:\n  port: eighty\n", FakeEnv({}));
  const auto e = ErrorOf([&] { r.Integer("http.port", std::nullopt, 1, 65535); });
  EXPECT_EQ(e.key(), "http.port");
  EXPECT_THAT(e.problem(), HasSubstr("expected an integer, got \"eighty\""));
  EXPECT_THAT(std::string(e.what()), HasSubstr("config error: http.port:"));
}

TEST(ConfigReader, IntegerWithTrailingGarbageIsRefused) {
  auto r = ConfigReader::FromString("", FakeEnv({{"POOL_SIZE", "8x"}}));
  EXPECT_EQ(ErrorOf([&] { r.Integer("pool.size", 1, 1, 64); }).key(), "pool.size");
}

TEST(ConfigReader, OutOfRangeIsRefused) {
  auto r = ConfigReader::FromString("pool:\n  size: 0\n", FakeEnv({}));
  const auto e = ErrorOf([&] { r.Integer("pool.size", std::nullopt, 1, 64); });
  EXPECT_THAT(e.problem(), HasSubstr("between 1 and 64, got 0"));
}

TEST(ConfigReader, BooleanAcceptsOnlyTrueOrFalse) {
  auto r = ConfigReader::FromString("flag: yes\n", FakeEnv({}));
  EXPECT_THAT(ErrorOf([&] { r.Boolean("flag"); }).problem(), HasSubstr("expected true or false"));
}

TEST(ConfigReader, DurationNeedsAUnit) {
  EXPECT_EQ(ConfigReader::FromString("t: 2s", FakeEnv({})).Duration("t", std::nullopt), std::chrono::seconds{2});
  EXPECT_EQ(ConfigReader::FromString("t: 5m", FakeEnv({})).Duration("t", std::nullopt), std::chrono::minutes{5});
  EXPECT_EQ(ConfigReader::FromString("t: 1h", FakeEnv({})).Duration("t", std::nullopt), std::chrono::hours{1});
  for (const char* bad : {"t: 2", "t: s", "t: -1s", "t: 2days", "t: 1.5s"}) {
    auto r = ConfigReader::FromString(bad, FakeEnv({}));
    EXPECT_EQ(ErrorOf([&] { r.Duration("t", std::nullopt); }).key(), "t") << bad;
  }
}

TEST(ConfigReader, ChoiceListsTheAllowedValues) {
  auto r = ConfigReader::FromString("log:\n  level: loud\n", FakeEnv({}));
  const auto e = ErrorOf([&] { r.Choice("log.level", "info", {"debug", "info"}); });
  EXPECT_THAT(e.problem(), HasSubstr("one of debug, info"));
}

TEST(ConfigReader, MapWhereValueExpectedIsRefused) {
  auto r = ConfigReader::FromString("http:\n  port:\n    value: 1\n", FakeEnv({}));
  EXPECT_THAT(ErrorOf([&] { r.Integer("http.port", 1, 1, 2); }).problem(), HasSubstr("single value"));
}

TEST(ConfigReader, SecretComesFromEnvironmentOnly) {
  auto ok = ConfigReader::FromString("", FakeEnv({{"DATABASE_URL", "postgresql://x"}}));
  EXPECT_EQ(ok.Secret("database.url"), "postgresql://x");

  auto in_file = ConfigReader::FromString("database:\n  url: postgresql://x\n", FakeEnv({}));
  const auto e = ErrorOf([&] { in_file.Secret("database.url"); });
  EXPECT_EQ(e.key(), "database.url");
  EXPECT_THAT(e.problem(), HasSubstr("must not be in the config file"));

  auto missing = ConfigReader::FromString("", FakeEnv({{"DATABASE_URL", ""}}));
  EXPECT_THAT(ErrorOf([&] { missing.Secret("database.url"); }).problem(), HasSubstr("set DATABASE_URL"));
}

TEST(ConfigReader, AnEnvironmentVariableInTheDaemonsOwnSectionThatSetsNoKeyIsRefusedNamingTheNearest) {
  auto r = ConfigReader::FromString("", FakeEnv({{"RECONCILER_GRACE_PERIOD", "1m"}}));
  r.Duration("reconciler.grace_period", std::chrono::minutes{2});
  r.Duration("reconciler.claim_lease", std::chrono::seconds{90});
  r.RejectUnknownKeys();
  // Known names, and names outside the sections given, pass.
  EXPECT_NO_THROW(r.RejectUnknownEnvironment({"reconciler"}, {"RECONCILER_GRACE_PERIOD", "HOME", "KAFKA_OPTS"}));
  try {
    r.RejectUnknownEnvironment({"reconciler"}, {"PATH", "RECONCILER_GRACE_PERIOUD"});
    FAIL() << "a typo under RECONCILER_ was accepted";
  } catch (const ConfigError& e) {
    EXPECT_EQ(e.key(), "RECONCILER_GRACE_PERIOUD");
    EXPECT_THAT(e.problem(), HasSubstr("did you mean RECONCILER_GRACE_PERIOD (reconciler.grace_period)?"));
  }
}

TEST(ConfigReader, UnknownKeyInFileIsRefused) {
  auto r = ConfigReader::FromString("http:\n  port: 1\n  prot: 2\n", FakeEnv({}));
  r.Integer("http.port", std::nullopt, 1, 2);
  EXPECT_EQ(ErrorOf([&] { r.RejectUnknownKeys(); }).key(), "http.prot");
}

TEST(ConfigReader, InvalidYamlAndNonMapAreRefused) {
  EXPECT_EQ(ErrorOf([] { ConfigReader::FromString("a: [1, 2", FakeEnv({})); }).key(), "--config");
  EXPECT_EQ(ErrorOf([] { ConfigReader::FromString("- a\n- b\n", FakeEnv({})); }).key(), "--config");
  EXPECT_EQ(ErrorOf([] { ConfigReader::FromFile("/nonexistent/charge.yaml", FakeEnv({})); }).key(), "--config");
}

TEST(ConfigReader, AListOrMapAsAKeyIsAConfigErrorNotACrash) {
  EXPECT_EQ(ErrorOf([] { ConfigReader::FromString("? [a, b]\n: 1\n", FakeEnv({})); }).key(), "--config");
  EXPECT_EQ(ErrorOf([] { ConfigReader::FromString("http:\n  {port: 1}: 2\n", FakeEnv({})); }).key(), "http");
  EXPECT_EQ(ErrorOf([] { ConfigReader::FromString("a:\n  - {[x]: 1}\n", FakeEnv({})); }).key(), "a");
}

// Found by the fuzz smoke: an alias inside the map it names made the first walk of the tree recurse until
// the stack overflowed. A cycle, and aliases that repeat each other into a huge tree, are config errors.
TEST(ConfigReader, AnAliasInsideWhatItNamesOrAnExponentialTreeIsAConfigErrorNotACrash) {
  const auto cycle = ErrorOf([] { ConfigReader::FromString("http: &b {port: *b}\n", FakeEnv({})); });
  EXPECT_THAT(cycle.key(), ::testing::StartsWith("http.port.port"));
  EXPECT_THAT(cycle.problem(), HasSubstr("nested deeper than 16 levels"));
  EXPECT_THAT(ErrorOf([] { ConfigReader::FromString("a: &a [1, *a]\n", FakeEnv({})); }).problem(),
              HasSubstr("nested deeper"));

  // 8^6 values from a few hundred bytes, six levels deep: refused long before they are all walked.
  std::string laughs = "l0: &l0 [1, 1, 1, 1, 1, 1, 1, 1]\n";
  for (int i = 1; i <= 6; ++i) {
    const auto previous = "*l" + std::to_string(i - 1);
    laughs += "l" + std::to_string(i) + ": &l" + std::to_string(i) + " [";
    for (int k = 0; k < 8; ++k) laughs += (k == 0 ? "" : ", ") + previous;
    laughs += "]\n";
  }
  EXPECT_THAT(ErrorOf([&] { ConfigReader::FromString(laughs, FakeEnv({})); }).problem(),
              HasSubstr("more than 10000 values"));

  // Aliases used as YAML means them still work.
  auto shared = ConfigReader::FromString("defaults: &d {port: 7}\nhttp: *d\n", FakeEnv({}));
  EXPECT_EQ(shared.Integer("http.port", std::nullopt, 1, 65535), 7);
}

TEST(ConfigReader, EnvNameUppercasesAndJoinsWithUnderscores) {
  EXPECT_EQ(ConfigReader::EnvName("kafka.bootstrap_servers"), "KAFKA_BOOTSTRAP_SERVERS");
}

}  // namespace
}  // namespace charge_outbox::config
