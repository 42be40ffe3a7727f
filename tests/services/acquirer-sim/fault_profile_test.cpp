// Fault profiles: the JSON format, its validation, the config form, and the reproducible draws.
#include "fault_profile.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <boost/json/parse.hpp>
#include <boost/json/serialize.hpp>
#include <map>

namespace charge_outbox::acquirer_sim {
namespace {

using namespace std::chrono_literals;

FaultProfile Parse(std::string_view text, std::uint64_t default_seed = 7) {
  auto r = ParseFaultProfileText(text, default_seed);
  if (!r) ADD_FAILURE() << "unexpected error at " << r.error().field << ": " << r.error().problem;
  return r ? *r : FaultProfile{};
}

ProfileError ParseError(std::string_view text) {
  auto r = ParseFaultProfileText(text, 7);
  if (r) {
    ADD_FAILURE() << "accepted: " << text;
    return {};
  }
  return r.error();
}

TEST(FaultProfile, EmptyObjectIsTheDefaultProfileWithTheDefaultSeed) {
  const auto p = Parse("{}", 99);
  FaultProfile expected;
  expected.seed = 99;
  EXPECT_EQ(p, expected);
  EXPECT_EQ(p.decline_rules.at("pm_tok_declined"), "card_declined");
  EXPECT_EQ(p.decline_rules.at("pm_tok_insufficient"), "insufficient_funds");
  EXPECT_EQ(p.apply_to, kOpCapture);
}

TEST(FaultProfile, ParsesEveryMember) {
  const auto p = Parse(R"({"seed": 42, "latency": {"distribution": "lognormal", "median_ms": 20, "p99_ms": 200,
    "max_ms": 900}, "timeout_rate": 0.1, "drop_rate": 0.2, "error_rate": 0.3, "throttle_rate": 0.4,
    "decline_rate": 1, "decline_code": "do_not_honor", "decline_rules": {"pm_x": "lost_card"},
    "visibility_delay_ms": 1500, "void_window_ms": 7000, "timeout_delay_ms": 30000, "retry_after_s": 3,
    "apply_to": ["void", "list"]})");
  EXPECT_EQ(p.seed, 42u);
  EXPECT_EQ(p.latency.distribution, LatencyDistribution::kLognormal);
  EXPECT_EQ(p.latency.median_ms, 20);
  EXPECT_EQ(p.latency.p99_ms, 200);
  EXPECT_EQ(p.latency.max_ms, 900);
  EXPECT_DOUBLE_EQ(p.timeout_rate, 0.1);
  EXPECT_DOUBLE_EQ(p.drop_rate, 0.2);
  EXPECT_DOUBLE_EQ(p.error_rate, 0.3);
  EXPECT_DOUBLE_EQ(p.throttle_rate, 0.4);
  EXPECT_DOUBLE_EQ(p.decline_rate, 1.0);
  EXPECT_EQ(p.decline_code, "do_not_honor");
  EXPECT_EQ(p.decline_rules, (std::map<std::string, std::string, std::less<>>{{"pm_x", "lost_card"}}));
  EXPECT_EQ(p.visibility_delay_ms, 1500);
  EXPECT_EQ(p.void_window_ms, 7000);
  EXPECT_EQ(p.timeout_delay_ms, 30000);
  EXPECT_EQ(p.retry_after_s, 3);
  EXPECT_EQ(p.apply_to, kOpVoid | kOpList);
}

TEST(FaultProfile, LognormalCapDefaultsToTenTimesP99) {
  const auto p = Parse(R"({"latency": {"distribution": "lognormal", "median_ms": 10, "p99_ms": 50}})");
  EXPECT_EQ(p.latency.max_ms, 500);
}

TEST(FaultProfile, ToJsonRoundTrips) {
  const auto p = Parse(R"({"seed": 5, "latency": {"distribution": "uniform", "min_ms": 1, "max_ms": 9},
    "drop_rate": 0.25, "decline_rules": {}, "apply_to": ["capture", "lookup"], "visibility_delay_ms": 10})");
  const auto json = FaultProfileToJson(p);
  const auto again = ParseFaultProfile(boost::json::value(json), 1);
  ASSERT_TRUE(again.has_value());
  EXPECT_EQ(*again, p);
  EXPECT_EQ(json.at("timeout_rate").as_int64(), 0);  // readable zeros, not 0E0
  EXPECT_EQ(json.at("latency").at("distribution").as_string(), "uniform");
  EXPECT_FALSE(json.at("latency").as_object().contains("median_ms"));
}

TEST(FaultProfile, ErrorsNameTheField) {
  EXPECT_EQ(ParseError(R"({"timeout_rate": 1.5})").field, "timeout_rate");
  EXPECT_EQ(ParseError(R"({"drop_rate": -0.1})").field, "drop_rate");
  EXPECT_EQ(ParseError(R"({"error_rate": "0.5"})").field, "error_rate");
  EXPECT_EQ(ParseError(R"({"visibility_delay_ms": -1})").field, "visibility_delay_ms");
  EXPECT_EQ(ParseError(R"({"void_window_ms": 86400001})").field, "void_window_ms");
  EXPECT_EQ(ParseError(R"({"visibility_delay_ms": 1.5})").field, "visibility_delay_ms");
  EXPECT_EQ(ParseError(R"({"timeout_delay_ms": 600001})").field, "timeout_delay_ms");
  EXPECT_EQ(ParseError(R"({"retry_after_s": 3601})").field, "retry_after_s");
  EXPECT_EQ(ParseError(R"({"seed": -1})").field, "seed");
  EXPECT_EQ(ParseError(R"({"timeout_rte": 0.5})").field, "timeout_rte");
  EXPECT_EQ(ParseError(R"({"latency": {"distribution": "gaussian"}})").field, "latency.distribution");
  EXPECT_EQ(ParseError(R"({"latency": {"ms": 5}})").field, "latency.distribution");
  EXPECT_EQ(ParseError(R"({"latency": {"distribution": "fixed", "min_ms": 5}})").field, "latency.min_ms");
  EXPECT_EQ(ParseError(R"({"latency": {"distribution": "uniform", "min_ms": 9, "max_ms": 2}})").field, "latency.max_ms");
  EXPECT_EQ(ParseError(R"({"latency": {"distribution": "lognormal", "median_ms": 50, "p99_ms": 10}})").field,
            "latency.p99_ms");
  EXPECT_EQ(ParseError(R"({"latency": {"distribution": "lognormal", "p99_ms": 10}})").field, "latency.median_ms");
  EXPECT_EQ(ParseError(R"({"decline_rules": {"pm_a": ""}})").field, "decline_rules.pm_a");
  EXPECT_EQ(ParseError(R"({"apply_to": ["capture", "refund"]})").field, "apply_to");
  EXPECT_EQ(Parse(R"({"apply_to": ["replay", "capture"]})").apply_to, kOpReplay | kOpCapture);
  EXPECT_EQ(ParseError(R"([1, 2])").field, "");
  const auto syntax = ParseError(R"({"timeout_rate": )");
  EXPECT_EQ(syntax.field, "");
  EXPECT_THAT(syntax.problem, ::testing::HasSubstr("not valid JSON"));
}

TEST(FaultProfile, DeeplyNestedJsonIsRefused) {
  const std::string deep = R"({"latency": {"distribution": "fixed", "ms": )" + std::string(20, '[') + "1" +
                           std::string(20, ']') + "}}";
  EXPECT_THAT(ParseError(deep).problem, ::testing::HasSubstr("not valid JSON"));
}

config::EnvLookup NoEnvironment() {
  return [](const std::string&) -> std::optional<std::string> { return std::nullopt; };
}

TEST(FaultProfileConfig, ReadsTheFaultsKeys) {
  auto reader = config::ConfigReader::FromString(R"(
faults:
  seed: 11
  timeout_rate: 0.05
  latency:
    distribution: fixed
    ms: 40
  decline_rules: "pm_a=lost_card, pm_b=stolen_card"
  apply_to: "capture, void"
  visibility_delay_ms: 250
)",
                                                 NoEnvironment());
  auto p = LoadFaultProfile(reader);
  EXPECT_EQ(p.seed, 11u);
  EXPECT_DOUBLE_EQ(p.timeout_rate, 0.05);
  EXPECT_EQ(p.latency.distribution, LatencyDistribution::kFixed);
  EXPECT_EQ(p.latency.ms, 40);
  EXPECT_EQ(p.decline_rules.size(), 2u);
  EXPECT_EQ(p.decline_rules.at("pm_b"), "stolen_card");
  EXPECT_EQ(p.apply_to, kOpCapture | kOpVoid);
  EXPECT_EQ(p.visibility_delay_ms, 250);
  EXPECT_NO_THROW(reader.RejectUnknownKeys());
}

TEST(FaultProfileConfig, EnvironmentOverridesAndErrorsNameTheKey) {
  auto env = [](const std::string& name) -> std::optional<std::string> {
    if (name == "FAULTS_DROP_RATE") return "0.5";
    return std::nullopt;
  };
  auto reader = config::ConfigReader::FromString("faults:\n  drop_rate: 0.1\n", env);
  EXPECT_DOUBLE_EQ(LoadFaultProfile(reader).drop_rate, 0.5);

  auto bad = config::ConfigReader::FromString("faults:\n  error_rate: 2\n", NoEnvironment());
  try {
    LoadFaultProfile(bad);
    FAIL() << "accepted error_rate 2";
  } catch (const config::ConfigError& e) {
    EXPECT_EQ(e.key(), "faults.error_rate");
  }
  auto not_a_number = config::ConfigReader::FromString("faults:\n  error_rate: often\n", NoEnvironment());
  EXPECT_THROW(LoadFaultProfile(not_a_number), config::ConfigError);
  auto bad_rules = config::ConfigReader::FromString("faults:\n  decline_rules: pm_a\n", NoEnvironment());
  try {
    LoadFaultProfile(bad_rules);
    FAIL() << "accepted decline_rules without '='";
  } catch (const config::ConfigError& e) {
    EXPECT_EQ(e.key(), "faults.decline_rules");
  }
}

TEST(Prng, SameSeedSameSequenceAndUniformInRange) {
  Prng a(42), b(42), c(43);
  bool differs = false;
  for (int i = 0; i < 1000; ++i) {
    const auto x = a.Next();
    EXPECT_EQ(x, b.Next());
    differs = differs || x != c.Next();
    const double u = a.Uniform();
    b.Uniform();
    EXPECT_GE(u, 0.0);
    EXPECT_LT(u, 1.0);
  }
  EXPECT_TRUE(differs);
}

TEST(SampleLatency, EachDistributionStaysInItsBounds) {
  Latency fixed{.distribution = LatencyDistribution::kFixed, .ms = 25};
  EXPECT_EQ(SampleLatency(fixed, 0.3, 0.9), 25ms);
  Latency uniform{.distribution = LatencyDistribution::kUniform, .min_ms = 10, .max_ms = 20};
  EXPECT_EQ(SampleLatency(uniform, 0.0, 0.0), 10ms);
  EXPECT_EQ(SampleLatency(uniform, 0.999999, 0.0), 20ms);
  Latency lognormal{.distribution = LatencyDistribution::kLognormal, .max_ms = 1000, .median_ms = 20, .p99_ms = 200};
  // u1 = 1 - e^-0.5*z^2 with cos(2*pi*u2) = 1 gives z exactly: z = 0 is the median, z = 2.326 the p99.
  EXPECT_EQ(SampleLatency(lognormal, 0.0, 0.0), 20ms);
  const double u_p99 = 1.0 - std::exp(-0.5 * 2.3263478740408408 * 2.3263478740408408);
  EXPECT_NEAR(static_cast<double>(SampleLatency(lognormal, u_p99, 0.0).count()), 200.0, 1.0);
  EXPECT_EQ(SampleLatency(lognormal, 0.9999999999, 0.0), 1000ms);  // capped
  Prng prng(3);
  int at_or_below_median = 0;
  for (int i = 0; i < 10000; ++i) {
    const auto ms = SampleLatency(lognormal, prng.Uniform(), prng.Uniform());
    EXPECT_GE(ms.count(), 0);
    EXPECT_LE(ms.count(), 1000);
    if (ms <= 20ms) ++at_or_below_median;
  }
  EXPECT_NEAR(at_or_below_median, 5000, 300);
}

std::string Pattern(FaultEngine& engine, int n) {
  std::string out;
  for (int i = 0; i < n; ++i) {
    const auto d = engine.Draw(kOpCapture, "pm_tok_visa");
    out += d.throttle ? 'T' : d.error ? 'E' : d.decline_code ? 'D' : d.drop ? 'X' : d.timeout ? 'O' : '.';
  }
  return out;
}

TEST(FaultEngine, SameSeedGivesTheSameFaultsEveryRun) {
  auto profile = Parse(R"({"seed": 1234, "throttle_rate": 0.1, "error_rate": 0.1, "decline_rate": 0.2,
    "drop_rate": 0.1, "timeout_rate": 0.1})");
  FaultEngine engine(profile);
  const auto first = Pattern(engine, 200);
  engine.Set(profile);  // restarts the generator
  EXPECT_EQ(Pattern(engine, 200), first);
  profile.seed = 4321;
  engine.Set(profile);
  EXPECT_NE(Pattern(engine, 200), first);
  for (const char kind : std::string("TEDXO.")) EXPECT_NE(first.find(kind), std::string::npos) << kind;
}

TEST(FaultEngine, RatesOfZeroAndOneAreExact) {
  FaultEngine never(Parse("{}"));
  FaultEngine always(Parse(R"({"error_rate": 1, "drop_rate": 1, "decline_rate": 1})"));
  for (int i = 0; i < 100; ++i) {
    const auto n = never.Draw(kOpCapture, "pm");
    EXPECT_FALSE(n.throttle || n.error || n.drop || n.timeout || n.decline_code);
    const auto a = always.Draw(kOpCapture, "pm");
    EXPECT_TRUE(a.error && a.drop && a.decline_code == "generic_decline");
    EXPECT_FALSE(a.throttle || a.timeout);  // throttle 0; drop wins over timeout
  }
}

TEST(FaultEngine, RandomFaultsApplyOnlyToTheListedOperationsButRulesAlways) {
  FaultEngine engine(Parse(R"({"error_rate": 1, "latency": {"distribution": "fixed", "ms": 30}})"));
  EXPECT_TRUE(engine.Draw(kOpCapture, "pm").error);
  const auto lookup = engine.Draw(kOpLookup);
  EXPECT_FALSE(lookup.error);
  EXPECT_EQ(lookup.latency, 0ms);
  EXPECT_EQ(engine.Draw(kOpCapture, "pm_tok_insufficient").decline_code, "insufficient_funds");
  engine.Set(Parse(R"({"apply_to": ["lookup"], "error_rate": 1, "visibility_delay_ms": 9})"));
  EXPECT_TRUE(engine.Draw(kOpLookup).error);
  const auto capture = engine.Draw(kOpCapture, "pm_tok_declined");
  EXPECT_FALSE(capture.error);
  EXPECT_EQ(capture.decline_code, "card_declined");
  EXPECT_EQ(capture.visibility_delay, 9ms);
}

TEST(FaultEngine, ResetRestoresTheStartUpProfile) {
  const auto initial = Parse(R"({"seed": 9, "drop_rate": 0.5})");
  FaultEngine engine(initial);
  const auto first = Pattern(engine, 50);
  engine.Set(Parse(R"({"error_rate": 1})"));
  engine.Reset();
  EXPECT_EQ(engine.Get(), initial);
  EXPECT_EQ(Pattern(engine, 50), first);
}

TEST(FaultProfile, ParsesTheServerErrorRateAndTheSearchLag) {
  const auto p = Parse(R"({"server_error_rate": 0.25, "search_lag_ms": 1200})");
  EXPECT_DOUBLE_EQ(p.server_error_rate, 0.25);
  EXPECT_EQ(p.search_lag_ms, 1200);
  const auto json = FaultProfileToJson(p);
  EXPECT_EQ(json.at("search_lag_ms").as_int64(), 1200);
  EXPECT_DOUBLE_EQ(json.at("server_error_rate").as_double(), 0.25);
  EXPECT_EQ(*ParseFaultProfile(json, 1), p);
  const auto defaults = Parse("{}");
  EXPECT_EQ(defaults.server_error_rate, 0);
  EXPECT_EQ(defaults.search_lag_ms, 0);
  EXPECT_EQ(ParseFaultProfileText(R"({"server_error_rate": 2})", 1).error().field, "server_error_rate");
  EXPECT_EQ(ParseFaultProfileText(R"({"search_lag_ms": -1})", 1).error().field, "search_lag_ms");
}

TEST(FaultProfileConfig, ReadsTheServerErrorRateAndTheSearchLag) {
  auto reader = config::ConfigReader::FromString("faults:\n  server_error_rate: 0.5\n  search_lag_ms: 800\n",
                                                 NoEnvironment());
  const auto p = LoadFaultProfile(reader);
  EXPECT_DOUBLE_EQ(p.server_error_rate, 0.5);
  EXPECT_EQ(p.search_lag_ms, 800);
}

// The server error's own draw and its "was the work done" draw are taken on every request, so turning
// server errors on changes no other fault of the sequence.
TEST(FaultEngine, ServerErrorsDoTheWorkAboutHalfTheTimeAndLeaveTheOtherDrawsAlone) {
  auto base = Parse(R"({"seed": 99, "throttle_rate": 0.1, "error_rate": 0.1, "drop_rate": 0.1, "timeout_rate": 0.1,
    "decline_rate": 0.2, "search_lag_ms": 300})");
  auto with_errors = base;
  with_errors.server_error_rate = 1;
  FaultEngine plain(base);
  FaultEngine failing(with_errors);
  int server_errors = 0;
  int with_work = 0;
  for (int i = 0; i < 400; ++i) {
    const auto p = plain.Draw(kOpCapture, "pm");
    const auto f = failing.Draw(kOpCapture, "pm");
    EXPECT_EQ(p.throttle, f.throttle);
    EXPECT_EQ(p.error, f.error);
    EXPECT_EQ(p.drop, f.drop);
    EXPECT_EQ(p.timeout, f.timeout);
    EXPECT_EQ(p.decline_code, f.decline_code);
    EXPECT_EQ(p.latency, f.latency);
    EXPECT_FALSE(p.server_error || p.server_error_work);
    EXPECT_EQ(f.search_lag, std::chrono::milliseconds{300});
    // A request refused before the endpoint started (429, 503) cannot fail inside it.
    EXPECT_EQ(f.server_error, !f.throttle && !f.error);
    server_errors += f.server_error ? 1 : 0;
    with_work += f.server_error_work ? 1 : 0;
  }
  EXPECT_GT(with_work, server_errors * 35 / 100);
  EXPECT_LT(with_work, server_errors * 65 / 100);
}

}  // namespace
}  // namespace charge_outbox::acquirer_sim
