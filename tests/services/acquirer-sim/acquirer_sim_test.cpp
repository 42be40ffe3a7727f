// acquirer-sim's pure pieces: request validation, the answers' bodies, timestamps, config and command
// line.
#include "acquirer_sim.hpp"
#include "acquirer_sim_daemon.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <boost/json/parse.hpp>

#include "problems.hpp"
#include "request_validation.hpp"
#include "responses.hpp"
#include "timestamp.hpp"

namespace charge_outbox::acquirer_sim {
namespace {

using ::testing::HasSubstr;

std::string Field(std::string_view body) {
  auto r = ParseCaptureRequest(body);
  if (r) {
    ADD_FAILURE() << "accepted " << body;
    return {};
  }
  return r.error().field;
}

TEST(ParseCaptureRequest, AcceptsTheContractBody) {
  auto r = ParseCaptureRequest(R"({"amount": 25000, "currency": "BRL", "reference": "ch_1", "payment_method": "pm_tok_visa"})");
  ASSERT_TRUE(r.has_value()) << r.error().detail;
  EXPECT_EQ(*r, (CaptureRequest{25000, "BRL", "ch_1", "pm_tok_visa"}));
}

TEST(ParseCaptureRequest, NamesTheFieldAtFault) {
  const std::string ok_rest = R"("currency": "BRL", "reference": "r", "payment_method": "p")";
  EXPECT_EQ(Field(R"({"amount": 0, )" + ok_rest + "}"), "amount");
  EXPECT_EQ(Field(R"({"amount": -5, )" + ok_rest + "}"), "amount");
  EXPECT_EQ(Field(R"({"amount": 1.5, )" + ok_rest + "}"), "amount");
  EXPECT_EQ(Field(R"({"amount": "100", )" + ok_rest + "}"), "amount");
  EXPECT_EQ(Field(R"({"currency": "BRL", "reference": "r", "payment_method": "p"})"), "amount");
  EXPECT_EQ(Field(R"({"amount": 1, "currency": "brl", "reference": "r", "payment_method": "p"})"), "currency");
  EXPECT_EQ(Field(R"({"amount": 1, "currency": "BRLX", "reference": "r", "payment_method": "p"})"), "currency");
  EXPECT_EQ(Field(R"({"amount": 1, "currency": "BRL", "reference": "", "payment_method": "p"})"), "reference");
  EXPECT_EQ(Field(R"({"amount": 1, "currency": "BRL", "reference": "r"})"), "payment_method");
  EXPECT_EQ(Field(R"({"amount": 1, "currency": "BRL", "reference": "r", "payment_method": 5})"), "payment_method");
  EXPECT_EQ(Field(R"({"amount": 1, )" + ok_rest + R"(, "tip": 3})"), "tip");
  EXPECT_EQ(Field("not json"), "body");
  EXPECT_EQ(Field("[1]"), "body");
  EXPECT_EQ(Field(R"({"amount": [[[[[[[[1]]]]]]]]})"), "body");  // depth limit
  EXPECT_EQ(Field(R"({"amount": 1, "currency": "BRL", "reference": ")" + std::string(256, 'r') +
                  R"(", "payment_method": "p"})"),
            "reference");
}

TEST(IdempotencyKey, OneTo255VisibleAsciiCharacters) {
  EXPECT_TRUE(IsValidIdempotencyKey("a"));
  EXPECT_TRUE(IsValidIdempotencyKey(std::string(255, '~')));
  EXPECT_FALSE(IsValidIdempotencyKey(""));
  EXPECT_FALSE(IsValidIdempotencyKey(std::string(256, 'a')));
  EXPECT_FALSE(IsValidIdempotencyKey("has space"));
  EXPECT_FALSE(IsValidIdempotencyKey("tab\t"));
  EXPECT_FALSE(IsValidIdempotencyKey("cobrança"));
}

// The bodies are the contract charge-api and the reconciler read, and a replay must repeat a 201 byte
// for byte: these are the exact bytes the simulator has always sent.
TEST(Responses, ACreatedCaptureIsTheContractBodyWithLocation) {
  const auto r = Created("cap_1", {25000, "BRL", "ch_\"1\"", "pm_tok_visa"}, "k\\1", 1'709'251'199'999'999);
  EXPECT_EQ(r.result_int(), 201u);
  EXPECT_EQ(r[boost::beast::http::field::location], "/v1/captures/cap_1");
  EXPECT_EQ(r.body(),
            R"({"id":"cap_1","status":"captured","amount":25000,"currency":"BRL","reference":"ch_\"1\"",)"
            R"("payment_method":"pm_tok_visa","idempotency_key":"k\\1","created_at":"2024-02-29T23:59:59.999999Z"})");
}

TEST(Responses, AVoidedCaptureShowsWhenAndTheVoidItself) {
  const Capture voided{"cap_2", 0, "k2", {5, "USD", "r", "p"}, 0, 0, 1'000'000};
  EXPECT_EQ(CaptureNow(voided).body(),
            R"({"id":"cap_2","status":"voided","amount":5,"currency":"USD","reference":"r","payment_method":"p",)"
            R"("idempotency_key":"k2","created_at":"1970-01-01T00:00:00.000000Z","voided_at":"1970-01-01T00:00:01.000000Z"})");
  EXPECT_EQ(Voided(voided).body(), R"({"id":"cap_2","status":"voided","voided_at":"1970-01-01T00:00:01.000000Z"})");
  EXPECT_EQ(Declined("card_declined").body(), R"({"status":"declined","decline_code":"card_declined"})");
  EXPECT_EQ(Declined("card_declined").result_int(), 402u);
}

TEST(Responses, AListPageCarriesItsNextToken) {
  ListPage page;
  EXPECT_EQ(CapturePage(page).body(), R"({"data":[],"next_page_token":null})");
  page.captures.push_back({"cap_1", 0, "k1", {1, "BRL", "r1", "p"}, 0, 0, 0});
  page.captures.push_back({"cap_2", 0, "k2", {2, "BRL", "r2", "p"}, 1, 0, 0});
  page.next_cursor = 0x2a;
  const auto body = boost::json::parse(CapturePage(page).body()).as_object();
  ASSERT_EQ(body.at("data").as_array().size(), 2u);
  EXPECT_EQ(body.at("data").as_array()[1].at("id").as_string(), "cap_2");
  EXPECT_EQ(body.at("next_page_token").as_string(), "pt_2a");
  EXPECT_EQ(ParsePageToken("pt_2a"), 0x2au);
  EXPECT_FALSE(ParsePageToken("pt_").has_value());
  EXPECT_FALSE(ParsePageToken("2a").has_value());
  EXPECT_FALSE(ParsePageToken("pt_2g").has_value());
}

TEST(Problems, AFaultRefusalSaysWhatWasNotDoneAndWhenToRetry) {
  FaultDecision throttled;
  throttled.throttle = true;
  throttled.retry_after_s = 3;
  const auto r = FaultRefusal(throttled, "; nothing was voided");
  EXPECT_EQ(r.result_int(), 429u);
  EXPECT_EQ(r[boost::beast::http::field::retry_after], "3");
  EXPECT_EQ(boost::json::parse(r.body()).at("detail").as_string(), "rate limit exceeded; nothing was voided");
  FaultDecision failed;
  failed.error = true;
  const auto e = FaultRefusal(failed);
  EXPECT_EQ(e.result_int(), 503u);
  EXPECT_EQ(boost::json::parse(e.body()).at("detail").as_string(), "temporary failure");
  EXPECT_EQ(boost::json::parse(FieldError("limit", "bad").body()).at("field").as_string(), "limit");
}

TEST(Timestamp, FormatsUtcWithMicroseconds) {
  EXPECT_EQ(FormatTimestamp(0), "1970-01-01T00:00:00.000000Z");
  EXPECT_EQ(FormatTimestamp(1'709'251'199'999'999), "2024-02-29T23:59:59.999999Z");
  EXPECT_EQ(FormatTimestamp(-1), "1969-12-31T23:59:59.999999Z");
}

TEST(Timestamp, ParsesRfc3339AndRoundTrips) {
  for (const std::int64_t t : {std::int64_t{0}, std::int64_t{1'709'251'199'999'999}, std::int64_t{1'800'000'000'000'001}}) {
    EXPECT_EQ(ParseTimestamp(FormatTimestamp(t)), t);
  }
  EXPECT_EQ(ParseTimestamp("2024-02-29T23:59:59Z"), 1'709'251'199'000'000);
  EXPECT_EQ(ParseTimestamp("2024-03-01T02:59:59.5+03:00"), 1'709'251'199'500'000);
  EXPECT_EQ(ParseTimestamp("2024-02-29t20:59:59.123456789-03:00"), 1'709'251'199'123'456);
  EXPECT_EQ(ParseTimestamp("2024-02-29T23:59:59z"), 1'709'251'199'000'000);
  for (const char* bad : {"", "2024-02-30T00:00:00Z", "2023-02-29T00:00:00Z", "2024-02-29 23:59:59Z",
                          "2024-02-29T24:00:00Z", "2024-02-29T23:59:59", "2024-02-29T23:59:59.Z",
                          "2024-02-29T23:59:59+0300", "2024-02-29T23:59:59Zjunk", "yesterday"}) {
    EXPECT_FALSE(ParseTimestamp(bad).has_value()) << bad;
  }
}

config::EnvLookup Env(std::map<std::string, std::string> values) {
  return [values = std::move(values)](const std::string& name) -> std::optional<std::string> {
    const auto it = values.find(name);
    if (it == values.end()) return std::nullopt;
    return it->second;
  };
}

TEST(LoadConfig, DefaultsAndRequiredKeys) {
  auto reader = config::ConfigReader::FromString("data:\n  dir: /tmp/x\n", Env({{"AUTH_API_KEYS", "k1, k2"}}));
  const auto c = LoadConfig(reader);
  EXPECT_EQ(c.http.address, "127.0.0.1");
  EXPECT_EQ(c.http.port, 8090);
  EXPECT_EQ(c.http.body_limit, 16u * 1024u);
  EXPECT_EQ(c.data_dir, "/tmp/x");
  EXPECT_EQ(c.api_keys, (std::vector<std::string>{"k1", "k2"}));
  EXPECT_EQ(c.shutdown_deadline, std::chrono::seconds{10});
  EXPECT_EQ(c.faults, FaultProfile{});
}

TEST(LoadConfig, ProblemsNameTheKey) {
  const auto key_of = [](const std::string& yaml, std::map<std::string, std::string> env) {
    auto reader = config::ConfigReader::FromString(yaml, Env(std::move(env)));
    try {
      LoadConfig(reader);
    } catch (const config::ConfigError& e) {
      return e.key();
    }
    return std::string("accepted");
  };
  EXPECT_EQ(key_of("data:\n  dir: /tmp/x\n", {}), "auth.api_keys");
  EXPECT_EQ(key_of("", {{"AUTH_API_KEYS", "k"}}), "data.dir");
  EXPECT_EQ(key_of("data:\n  dir: /x\nauth:\n  api_keys: k\n", {{"AUTH_API_KEYS", "k"}}), "auth.api_keys");
  EXPECT_EQ(key_of("data:\n  dir: /x\n", {{"AUTH_API_KEYS", "a,,b"}}), "auth.api_keys");
  EXPECT_EQ(key_of("data:\n  dir: /x\nhttp:\n  port: 70000\n", {{"AUTH_API_KEYS", "k"}}), "http.port");
  EXPECT_EQ(key_of("data:\n  dir: /x\nhttp:\n  address: localhost\n", {{"AUTH_API_KEYS", "k"}}), "http.address");
  EXPECT_EQ(key_of("data:\n  dir: /x\nfaults:\n  drop_rate: 3\n", {{"AUTH_API_KEYS", "k"}}), "faults.drop_rate");
  EXPECT_EQ(key_of("data:\n  dir: /x\nfaults:\n  dorp_rate: 0.1\n", {{"AUTH_API_KEYS", "k"}}), "faults.dorp_rate");
}

TEST(LoadConfig, TheOldServerKeysAreRefusedNamingTheirHttpNames) {
  for (const std::string name : {"address", "port", "threads", "body_limit", "read_timeout", "idle_timeout",
                                 "max_connections"}) {
    auto reader = config::ConfigReader::FromString("data:\n  dir: /x\nserver:\n  " + name + ": 1\n",
                                                   Env({{"AUTH_API_KEYS", "k"}}));
    try {
      LoadConfig(reader);
      ADD_FAILURE() << "server." << name << " accepted";
    } catch (const config::ConfigError& e) {
      EXPECT_EQ(e.key(), "server." + name);
      EXPECT_THAT(e.what(), HasSubstr("http." + name));
    }
  }
  auto from_env = config::ConfigReader::FromString("data:\n  dir: /x\n", Env({{"AUTH_API_KEYS", "k"}, {"SERVER_PORT", "0"}}));
  EXPECT_THROW(LoadConfig(from_env), config::ConfigError);
  auto new_keys = config::ConfigReader::FromString("data:\n  dir: /x\nhttp:\n  port: 9000\n  threads: 2\n",
                                                   Env({{"AUTH_API_KEYS", "k"}, {"HTTP_ADDRESS", "0.0.0.0"}}));
  const auto c = LoadConfig(new_keys);
  EXPECT_EQ(c.http.port, 9000);
  EXPECT_EQ(c.http.threads, 2u);
  EXPECT_EQ(c.http.address, "0.0.0.0");
}

TEST(AcquirerSimDaemon, TakesNoArgumentButTheConfigFile) {
  const auto daemon = MakeDaemon();
  auto reader = config::ConfigReader::FromString("", Env({{"AUTH_API_KEYS", "k"}, {"DATA_DIR", "/x"}}));
  try {
    daemon->Configure({"serve"}, reader);
    FAIL();
  } catch (const config::ConfigError& e) {
    EXPECT_EQ(e.key(), "argv");
    EXPECT_THAT(e.what(), HasSubstr("usage: acquirer-sim [--config PATH]"));
  }
}

TEST(MerchantIdFor, IsStableAndDoesNotContainTheKey) {
  EXPECT_EQ(MerchantIdFor("secret-key"), MerchantIdFor("secret-key"));
  EXPECT_NE(MerchantIdFor("secret-key"), MerchantIdFor("other-key"));
  EXPECT_THAT(MerchantIdFor("secret-key"), ::testing::Not(HasSubstr("secret")));
  EXPECT_EQ(MerchantIdFor("k").size(), 18u);
}

}  // namespace
}  // namespace charge_outbox::acquirer_sim
