// ConnectionString and LoadConnectionSettings: every connection of ours gets the timeouts, in the URL's
// own form, and what DATABASE_URL already says wins. libpq itself reads each result back
// (PQconninfoParse), so a string libpq would read differently, or refuse, fails here.
#include <libpq-fe.h>

#include <gtest/gtest.h>

#include <map>
#include <string>

#include "charge_outbox/config/config.hpp"
#include "charge_outbox/db/database.hpp"

namespace charge_outbox::db {
namespace {

using namespace std::chrono_literals;

// What libpq makes of a connection string: every keyword it sets.
std::map<std::string, std::string> AsLibpqReadsIt(const std::string& conninfo) {
  char* error = nullptr;
  PQconninfoOption* options = PQconninfoParse(conninfo.c_str(), &error);
  if (options == nullptr) {
    const std::string why = error != nullptr ? error : "out of memory";
    PQfreemem(error);
    ADD_FAILURE() << "libpq refuses " << conninfo << ": " << why;
    return {};
  }
  std::map<std::string, std::string> out;
  for (auto* o = options; o->keyword != nullptr; ++o) {
    if (o->val != nullptr) out[o->keyword] = o->val;
  }
  PQconninfoFree(options);
  return out;
}

const std::string kServerDefaults =
    "-c statement_timeout=5000 -c idle_in_transaction_session_timeout=10000 -c tcp_keepalives_idle=5"
    " -c tcp_keepalives_interval=2 -c tcp_keepalives_count=3 -c tcp_user_timeout=10000";

void ExpectDefaults(const std::map<std::string, std::string>& read) {
  EXPECT_EQ(read.at("connect_timeout"), "5");
  EXPECT_EQ(read.at("keepalives"), "1");
  EXPECT_EQ(read.at("keepalives_idle"), "5");
  EXPECT_EQ(read.at("keepalives_interval"), "2");
  EXPECT_EQ(read.at("keepalives_count"), "3");
  EXPECT_EQ(read.at("tcp_user_timeout"), "10000");
  EXPECT_EQ(read.at("options"), kServerDefaults);
}

TEST(ConnectionString, AUriGetsEveryTimeoutAsQueryParameters) {
  const auto s = ConnectionString("postgresql://u@h:5432/d", "charge-api", {});
  EXPECT_EQ(s,
            "postgresql://u@h:5432/d?connect_timeout=5&keepalives=1&keepalives_idle=5&keepalives_interval=2"
            "&keepalives_count=3&tcp_user_timeout=10000&options=-c%20statement_timeout%3D5000%20-c%20"
            "idle_in_transaction_session_timeout%3D10000%20-c%20tcp_keepalives_idle%3D5%20-c%20"
            "tcp_keepalives_interval%3D2%20-c%20tcp_keepalives_count%3D3%20-c%20tcp_user_timeout%3D10000"
            "&application_name=charge-api");
  const auto read = AsLibpqReadsIt(s);
  ExpectDefaults(read);
  EXPECT_EQ(read.at("host"), "h");
  EXPECT_EQ(read.at("dbname"), "d");
  EXPECT_EQ(read.at("application_name"), "charge-api");
}

TEST(ConnectionString, AKeywordValueStringGetsEveryTimeoutAsQuotedKeywords) {
  const auto s = ConnectionString("host=db user=charge dbname=charges", "outbox-relay", {});
  EXPECT_EQ(s,
            "host=db user=charge dbname=charges connect_timeout='5' keepalives='1' keepalives_idle='5'"
            " keepalives_interval='2' keepalives_count='3' tcp_user_timeout='10000' options='" +
                kServerDefaults + "' application_name='outbox-relay'");
  const auto read = AsLibpqReadsIt(s);
  ExpectDefaults(read);
  EXPECT_EQ(read.at("user"), "charge");
  // An empty DATABASE_URL means libpq's defaults (PGHOST...): still keyword/value.
  ExpectDefaults(AsLibpqReadsIt(ConnectionString("", "reconciler", {})));
}

TEST(ConnectionString, WhatTheUrlSetsWins) {
  for (const std::string url : {"postgres://h/d?sslmode=require&connect_timeout=30&keepalives_idle=60"
                                "&options=-c%20statement_timeout%3D0%20-c%20search_path%3Dpay",
                                "host=h dbname=d connect_timeout = 30 keepalives_idle='60'"
                                " options='-c statement_timeout=0 -c search_path=pay'"}) {
    const auto read = AsLibpqReadsIt(ConnectionString(url, "charge-api", {}));
    EXPECT_EQ(read.at("connect_timeout"), "30") << url;
    EXPECT_EQ(read.at("keepalives_idle"), "60") << url;
    EXPECT_EQ(read.at("keepalives_interval"), "2") << url;  // not set there: ours
    // The URL's options come after ours: the server applies the last -c of a name.
    EXPECT_EQ(read.at("options"), kServerDefaults + " -c statement_timeout=0 -c search_path=pay") << url;
  }
}

TEST(ConnectionString, TheDaemonsApplicationNameReplacesTheUrls) {
  EXPECT_EQ(AsLibpqReadsIt(ConnectionString("postgresql://h/d?application_name=x", "a b&c", {})).at("application_name"),
            "a b&c");
  EXPECT_EQ(AsLibpqReadsIt(ConnectionString("host=db application_name=x", "it's\\x", {})).at("application_name"),
            "it's\\x");
}

TEST(ConnectionString, ZeroLeavesASettingToLibpqOrTheServer) {
  ConnectionSettings s;
  s.tcp_user_timeout = 0ms;
  s.statement_timeout = 0ms;
  s.idle_in_transaction_timeout = 0ms;
  const auto read = AsLibpqReadsIt(ConnectionString("postgresql://h/d", "", s));
  EXPECT_FALSE(read.contains("tcp_user_timeout"));
  EXPECT_FALSE(read.contains("application_name"));
  EXPECT_EQ(read.at("options"), "-c tcp_keepalives_idle=5 -c tcp_keepalives_interval=2 -c tcp_keepalives_count=3");
}

config::ConfigReader Reader(const std::string& yaml) {
  return config::ConfigReader::FromString(yaml, [](const std::string&) { return std::optional<std::string>(); });
}

TEST(LoadConnectionSettings, ReadsTheDatabaseKeys) {
  auto r = Reader(
      "database:\n  connect_timeout: 2500ms\n  keepalives_idle: 10s\n  keepalives_interval: 1s\n"
      "  keepalives_count: 5\n  tcp_user_timeout: 3s\n  statement_timeout: 1s\n"
      "  idle_in_transaction_timeout: 0s\n  call_timeout: 2s\n");
  const auto s = LoadConnectionSettings(r);
  EXPECT_EQ(s.connect_timeout, 3s);  // libpq counts whole seconds: rounded up
  EXPECT_EQ(s.keepalives_idle, 10s);
  EXPECT_EQ(s.keepalives_interval, 1s);
  EXPECT_EQ(s.keepalives_count, 5);
  EXPECT_EQ(s.tcp_user_timeout, 3s);
  EXPECT_EQ(s.statement_timeout, 1s);
  EXPECT_EQ(s.idle_in_transaction_timeout, 0ms);
  EXPECT_EQ(s.call_timeout, 2s);
}

TEST(LoadConnectionSettings, DefaultsAreSecondsNotMinutes) {
  auto r = Reader("");
  const auto s = LoadConnectionSettings(r);
  EXPECT_EQ(s.connect_timeout, 5s);
  EXPECT_EQ(s.statement_timeout, 5s);
  EXPECT_EQ(s.call_timeout, 10s);
  EXPECT_LE(s.keepalives_idle + s.keepalives_interval * s.keepalives_count, 15s);
}

TEST(LoadConnectionSettings, ABadValueNamesItsKey) {
  auto expect_error = [](const std::string& yaml, const std::string& key) {
    auto r = Reader(yaml);
    try {
      LoadConnectionSettings(r);
      ADD_FAILURE() << "accepted: " << yaml;
    } catch (const config::ConfigError& e) {
      EXPECT_NE(std::string(e.what()).find(key), std::string::npos) << e.what();
    }
  };
  expect_error("database:\n  connect_timeout: 1s\n", "database.connect_timeout");  // libpq's floor is 2 s
  expect_error("database:\n  keepalives_count: 0\n", "database.keepalives_count");
  expect_error("database:\n  statement_timeout: 5\n", "database.statement_timeout");  // no unit
  expect_error("database:\n  statement_timeout: 5s\n  call_timeout: 5s\n", "database.call_timeout");
}

}  // namespace
}  // namespace charge_outbox::db
