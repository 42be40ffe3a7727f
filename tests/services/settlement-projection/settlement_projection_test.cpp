// settlement-projection's pure parts: the fold of charge events into captured totals, the query API's
// parsing of its request target, and the configuration's checks.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <boost/json/parse.hpp>

#include <algorithm>
#include <cctype>

#include "api_tokens.hpp"
#include "captured_totals.hpp"
#include "charge_outbox/config/config.hpp"
#include "charge_outbox/util/sha256.hpp"
#include "charge_outbox/util/time.hpp"
#include "projection_config.hpp"
#include "totals_query.hpp"

namespace charge_outbox::settlement {
namespace {

using Deltas = std::map<TotalsKey, TotalsDelta>;

inbox::ChargeEvent Event(int sequence, const std::string& status, const std::string& time,
                         const std::string& fields = R"("merchant_id":"m1","amount":2500,"currency":"EUR",)") {
  return {.event_id = "00000000-0000-4000-8000-00000000000" + std::to_string(sequence),
          .event_type = "payments.charge." + (status == "pending" ? std::string("initiated") : status) + ".v1",
          .event_time = *util::ParseRfc3339(time),
          .charge_id = "ch_1",
          .sequence = sequence,
          .payload = R"({"id":"ch_1",)" + fields + R"("status":")" + status + R"(","sequence":)" +
                     std::to_string(sequence) + "}"};
}

TEST(SettlementProjectionFold, ACaptureCountsOnTheDayOfItsEvent) {
  Deltas deltas;
  auto state = Fold(std::nullopt, Event(1, "pending", "2026-12-01T23:59:59.000Z"), deltas);
  ASSERT_TRUE(state);
  EXPECT_TRUE(deltas.empty()) << "a pending charge counts nowhere";
  state = Fold(state, Event(2, "captured", "2026-12-02T00:00:00.001Z"), deltas);
  ASSERT_TRUE(state);
  EXPECT_EQ(state->captured_day, "2026-12-02");
  ASSERT_EQ(deltas.size(), 1u);
  const auto& [key, delta] = *deltas.begin();
  EXPECT_EQ(key, (TotalsKey{"m1", "2026-12-02", "EUR"}));
  EXPECT_EQ(delta.count, 1);
  EXPECT_EQ(delta.amount, 2500);
}

TEST(SettlementProjectionFold, NeedsReviewAfterACaptureTakesItOutOfTheCapturesDay) {
  Deltas deltas;
  auto state = Fold(std::nullopt, Event(1, "pending", "2026-12-01T10:00:00.000Z"), deltas);
  state = Fold(state, Event(2, "captured", "2026-12-01T10:00:01.000Z"), deltas);
  // The review comes a day later: it is the capture's day that loses the charge.
  state = Fold(state, Event(3, "needs_review", "2026-12-02T09:00:00.000Z"), deltas);
  ASSERT_TRUE(state);
  EXPECT_FALSE(state->captured_day);
  ASSERT_EQ(deltas.size(), 1u);
  EXPECT_EQ(deltas.begin()->first, (TotalsKey{"m1", "2026-12-01", "EUR"}));
  EXPECT_EQ(deltas.begin()->second.count, 0);
  EXPECT_EQ(deltas.begin()->second.amount, 0);

  Deltas later;  // the review in a batch of its own: a negative delta on the capture's day
  ChargeState captured{.merchant_id = "m1", .currency = "EUR", .amount = 2500, .status = "captured",
                       .captured_day = "2026-12-01", .sequence = 2};
  Fold(captured, Event(3, "needs_review", "2026-12-02T09:00:00.000Z"), later);
  ASSERT_EQ(later.size(), 1u);
  EXPECT_EQ(later.begin()->first.day, "2026-12-01");
  EXPECT_EQ(later.begin()->second.count, -1);
  EXPECT_EQ(later.begin()->second.amount, -2500);
}

TEST(SettlementProjectionFold, AFailedChargeNeverCounts) {
  Deltas deltas;
  auto state = Fold(std::nullopt, Event(1, "pending", "2026-12-01T10:00:00.000Z"), deltas);
  state = Fold(state, Event(2, "failed", "2026-12-01T10:00:01.000Z"), deltas);
  ASSERT_TRUE(state);
  EXPECT_EQ(state->status, "failed");
  EXPECT_FALSE(state->captured_day);
  EXPECT_TRUE(deltas.empty());
}

TEST(SettlementProjectionFold, APayloadMissingWhatTheProjectionNeedsIsSkipped) {
  for (const std::string fields : {R"("amount":2500,"currency":"EUR",)", R"("merchant_id":"m1","currency":"EUR",)",
                                   R"("merchant_id":"m1","amount":2500,)", R"("merchant_id":"m1","amount":"2500","currency":"EUR",)"}) {
    Deltas deltas;
    EXPECT_FALSE(Fold(std::nullopt, Event(2, "captured", "2026-12-01T10:00:00.000Z", fields), deltas)) << fields;
    EXPECT_TRUE(deltas.empty()) << fields;
  }
}

// The problem's status and its `field` member.
std::pair<unsigned, std::string> Problem(const ParsedQuery& parsed) {
  if (!parsed.problem) return {0, ""};
  const auto body = boost::json::parse(parsed.problem->body()).as_object();
  const auto* field = body.if_contains("field");
  return {parsed.problem->result_int(), field != nullptr ? std::string(field->as_string()) : ""};
}

TEST(SettlementProjectionTotalsQuery, DefaultsAreTodayAndBoundsAreKept) {
  auto p = ParseTotalsQuery("/v1/merchants/m-1/captured-totals", "2026-12-02");
  ASSERT_TRUE(p.query);
  EXPECT_EQ(p.query->merchant_id, "m-1");
  EXPECT_EQ(p.query->from, "2026-12-02");
  EXPECT_EQ(p.query->to, "2026-12-02");
  p = ParseTotalsQuery("/v1/merchants/m-1/captured-totals?to=2026-11-30", "2026-12-02");
  ASSERT_TRUE(p.query);
  EXPECT_EQ(p.query->from, "2026-11-30") << "from defaults to to";
  p = ParseTotalsQuery("/v1/merchants/m-1/captured-totals?from=2025-12-02&to=2026-12-02", "2026-12-02");
  ASSERT_TRUE(p.query) << "366 days is the most";
  EXPECT_EQ(p.query->from, "2025-12-02");
}

TEST(SettlementProjectionTotalsQuery, BadInputIsA400NamingTheField) {
  const std::string base = "/v1/merchants/m-1/captured-totals";
  using P = std::pair<unsigned, std::string>;
  EXPECT_EQ(Problem(ParseTotalsQuery(base + "?from=2026-13-01", "2026-12-02")), (P{400, "from"}));
  EXPECT_EQ(Problem(ParseTotalsQuery(base + "?from=2026-12-1", "2026-12-02")), (P{400, "from"}));
  EXPECT_EQ(Problem(ParseTotalsQuery(base + "?to=yesterday", "2026-12-02")), (P{400, "to"}));
  EXPECT_EQ(Problem(ParseTotalsQuery(base + "?from=2026-12-03&to=2026-12-02", "2026-12-02")), (P{400, "from"}));
  EXPECT_EQ(Problem(ParseTotalsQuery(base + "?from=2025-12-01&to=2026-12-02", "2026-12-02")), (P{400, "from"}))
      << "367 days";
  EXPECT_EQ(Problem(ParseTotalsQuery(base + "?day=2026-12-02", "2026-12-02")), (P{400, "day"}));
}

TEST(SettlementProjectionTotalsQuery, AnotherPathIsA404) {
  for (const std::string target : {"/v1/merchants/m-1/totals", "/v1/merchants//captured-totals",
                                   "/v1/merchants/captured-totals", "/v2/merchants/m-1/captured-totals", "/"}) {
    const auto p = ParseTotalsQuery(target, "2026-12-02");
    EXPECT_FALSE(p.query) << target;
    EXPECT_EQ(Problem(p).first, 404u) << target;
  }
  EXPECT_EQ(Problem(ParseTotalsQuery("/v1/merchants/m-1/captured-totals/x", "2026-12-02")).first, 404u);
}

config::EnvLookup Env(std::map<std::string, std::string> vars) {
  return [vars = std::move(vars)](const std::string& name) -> std::optional<std::string> {
    const auto it = vars.find(name);
    if (it == vars.end()) return std::nullopt;
    return it->second;
  };
}

std::map<std::string, std::string> Minimal() {
  return {{"DATABASE_URL", "postgresql://db/projection"}, {"KAFKA_BOOTSTRAP_SERVERS", "k:9092"}};
}

TEST(SettlementProjectionConfig, DefaultsAndTheEnvironment) {
  auto vars = Minimal();
  vars["INBOX_GAPS_POLICY"] = "hold";
  vars["INBOX_GAPS_WAIT"] = "1s";
  vars["KAFKA_GROUP_ID"] = "settle-a";
  auto reader = config::ConfigReader::FromString("", Env(vars));
  const auto c = LoadConfig(reader);
  EXPECT_EQ(c.http.port, 8090);
  EXPECT_EQ(c.admin.port, 9090);
  EXPECT_EQ(c.inbox.topic, "charge-events");
  EXPECT_EQ(c.inbox.group_id, "settle-a");
  EXPECT_EQ(c.inbox.gaps.policy, inbox::GapPolicy::kHold);
  EXPECT_EQ(c.inbox.gaps.wait, std::chrono::seconds{1});
  EXPECT_EQ(c.inbox.kafka_properties.count("enable.auto.commit"), 0u) << "the inbox sets it itself";
}

std::string ConfigErrorKey(std::map<std::string, std::string> extra) {
  auto vars = Minimal();
  for (auto& [k, v] : extra) vars[k] = v;
  auto reader = config::ConfigReader::FromString("", Env(vars));
  try {
    LoadConfig(reader);
  } catch (const config::ConfigError& e) {
    return e.key();
  }
  return "";
}

TEST(SettlementProjectionConfig, BadValuesAreConfigErrorsNamingTheKey) {
  EXPECT_EQ(ConfigErrorKey({{"HTTP_PORT", "8100"}, {"ADMIN_PORT", "8100"}}), "admin.port");
  EXPECT_EQ(ConfigErrorKey({{"HTTP_PORT", "0"}, {"ADMIN_PORT", "0"}}), "") << "two ephemeral ports never clash";
  EXPECT_EQ(ConfigErrorKey({{"INBOX_GAPS_POLICY", "bogus"}}), "inbox.gaps.policy");
  EXPECT_EQ(ConfigErrorKey({{"INBOX_GAPS_WAIT", "10"}}), "inbox.gaps.wait") << "a bare number has no unit";
  EXPECT_EQ(ConfigErrorKey({{"INBOX_BATCH_SIZE", "0"}}), "inbox.batch_size");
  EXPECT_EQ(ConfigErrorKey({{"KAFKA_BOOTSTRAP_SERVERS", ""}}), "kafka.bootstrap_servers");
  EXPECT_EQ(ConfigErrorKey({{"INBOX_BACKOFF_BASE", "2s"}, {"INBOX_BACKOFF_MAX", "1s"}}), "inbox.backoff.max");
}

// The inbox's backoff keys are spelled `inbox.backoff.*` like every daemon's; the old spellings fail at
// start, naming the new key, instead of being ignored for the default.
TEST(SettlementProjectionConfig, BackoffKeysAndTheirOldSpellingsRefused) {
  auto vars = Minimal();
  vars["INBOX_BACKOFF_BASE"] = "50ms";
  vars["INBOX_BACKOFF_MAX"] = "2s";
  auto reader = config::ConfigReader::FromString("", Env(vars));
  const auto c = LoadConfig(reader);
  EXPECT_EQ(c.inbox.backoff.base, std::chrono::milliseconds{50});
  EXPECT_EQ(c.inbox.backoff.max, std::chrono::seconds{2});

  EXPECT_EQ(ConfigErrorKey({{"INBOX_RETRY_BACKOFF", "100ms"}}), "inbox.retry_backoff");
  auto in_file = config::ConfigReader::FromString("inbox:\n  max_retry_backoff: 1s\n", Env(Minimal()));
  try {
    LoadConfig(in_file);
    ADD_FAILURE() << "inbox.max_retry_backoff accepted";
  } catch (const config::ConfigError& e) {
    EXPECT_EQ(e.key(), "inbox.max_retry_backoff");
    EXPECT_THAT(e.problem(), ::testing::HasSubstr("inbox.backoff.max"));
  }
}


TEST(SettlementProjectionTokens, ATokenIsAcceptedByItsHashOnly) {
  const ApiTokens tokens(ParseTokenHashes("k", util::Sha256Hex("tok-A") + "," + util::Sha256Hex("tok-B")));
  EXPECT_EQ(tokens.Check("Bearer tok-A"), TokenCheck::kAccepted);
  EXPECT_EQ(tokens.Check("bEaReR   tok-B  "), TokenCheck::kAccepted);
  EXPECT_EQ(tokens.Check("Bearer tok-C"), TokenCheck::kUnknown);
  EXPECT_EQ(tokens.Check("Bearer tok-A="), TokenCheck::kUnknown);
  EXPECT_EQ(tokens.Check("Bearer " + util::Sha256Hex("tok-A")), TokenCheck::kUnknown) << "the hash is no token";
  EXPECT_EQ(tokens.Check(std::nullopt), TokenCheck::kMissing);
  EXPECT_EQ(tokens.Check(""), TokenCheck::kMissing);
  EXPECT_EQ(tokens.Check("Basic dG9rLUE="), TokenCheck::kOtherScheme);
  EXPECT_EQ(tokens.Check("Bearertok-A"), TokenCheck::kOtherScheme);
  EXPECT_EQ(tokens.Check("Bearer"), TokenCheck::kMalformed);
  EXPECT_EQ(tokens.Check("Bearer tok A"), TokenCheck::kMalformed);
  EXPECT_EQ(tokens.Check("Bearer =tok"), TokenCheck::kMalformed);
  EXPECT_EQ(tokens.Check("Bearer tok=A"), TokenCheck::kMalformed);
  EXPECT_EQ(tokens.Check("Bearer t\xc3\xa9"), TokenCheck::kMalformed);
  EXPECT_EQ(tokens.Check("Bearer " + std::string(513, 'a')), TokenCheck::kMalformed);
  EXPECT_EQ(ApiTokens({}).Check("Bearer tok-A"), TokenCheck::kUnknown);
}

TEST(SettlementProjectionTokens, RefusalsAreProblemsWithABearerChallenge) {
  for (const auto check : {TokenCheck::kMissing, TokenCheck::kOtherScheme, TokenCheck::kMalformed, TokenCheck::kUnknown}) {
    const auto r = Unauthorized(check);
    EXPECT_EQ(r.result_int(), 401u);
    EXPECT_EQ(r[boost::beast::http::field::content_type], "application/problem+json");
    const auto body = boost::json::parse(r.body()).as_object();
    EXPECT_TRUE(body.at("type").as_string().starts_with("urn:charge-outbox:problem:token-")) << r.body();
    EXPECT_TRUE(r[boost::beast::http::field::www_authenticate].starts_with("Bearer")) << r.body();
  }
  EXPECT_EQ(Unauthorized(TokenCheck::kMissing)[boost::beast::http::field::www_authenticate], "Bearer");
  EXPECT_EQ(Unauthorized(TokenCheck::kUnknown)[boost::beast::http::field::www_authenticate],
            R"(Bearer error="invalid_token", error_description="unknown or withdrawn token")");
}

TEST(SettlementProjectionConfig, TokenHashesAreHexDigestsAndTheDaemonNeedsOne) {
  const auto a = util::Sha256Hex("a");
  auto vars = Minimal();
  auto upper = util::Sha256Hex("b");
  std::transform(upper.begin(), upper.end(), upper.begin(), [](unsigned char c) { return std::toupper(c); });
  vars["HTTP_TOKEN_HASHES"] = " " + a + " ,  " + upper + " ";
  vars["READINESS_REUSE_FOR"] = "250ms";
  auto reader = config::ConfigReader::FromString("", Env(vars));
  const auto c = LoadConfig(reader);
  ASSERT_EQ(c.api_token_hashes.size(), 2u);
  EXPECT_EQ(c.api_token_hashes[0], util::Sha256("a"));
  EXPECT_EQ(c.api_token_hashes[1], util::Sha256("b"));
  EXPECT_EQ(c.readiness_reuse, std::chrono::milliseconds{250});
  EXPECT_NO_THROW(RequireApiTokens(c));

  auto none = config::ConfigReader::FromString("", Env(Minimal()));
  const auto without = LoadConfig(none);  // `migrate` needs no token
  EXPECT_EQ(without.readiness_reuse, std::chrono::seconds{1});
  try {
    RequireApiTokens(without);
    ADD_FAILURE() << "a daemon without a token hash";
  } catch (const config::ConfigError& e) {
    EXPECT_EQ(e.key(), "http.token_hashes");
  }

  EXPECT_EQ(ConfigErrorKey({{"HTTP_TOKEN_HASHES", a + ",,"}}), "http.token_hashes");
  EXPECT_EQ(ConfigErrorKey({{"HTTP_TOKEN_HASHES", a.substr(1)}}), "http.token_hashes");
  EXPECT_EQ(ConfigErrorKey({{"HTTP_TOKEN_HASHES", a.substr(1) + "g"}}), "http.token_hashes");
  EXPECT_EQ(ConfigErrorKey({{"READINESS_REUSE_FOR", "2m"}}), "readiness.reuse_for");
  try {
    ParseTokenHashes("http.token_hashes", "my-secret-token");
    ADD_FAILURE() << "a token accepted as a hash";
  } catch (const config::ConfigError& e) {
    EXPECT_EQ(std::string(e.what()).find("my-secret-token"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace charge_outbox::settlement
