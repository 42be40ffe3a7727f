// The command line, RFC 3339 parsing, the configuration's defaults and checks, and the summary line.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <boost/json/parse.hpp>

#include "charge_outbox/config/config.hpp"
#include "charge_outbox/util/time.hpp"
#include "command_line.hpp"
#include "reconciler_config.hpp"
#include "pushgateway.hpp"
#include "run_summary.hpp"

namespace charge_outbox::reconciler {
namespace {

using namespace std::chrono_literals;
using ::testing::HasSubstr;

std::string Rfc(std::string_view text) {
  const auto t = util::ParseRfc3339(text);
  return t ? util::FormatRfc3339(*t) + "/" + std::to_string(util::ToUnixMicros(*t) % 1000000) : "invalid";
}

TEST(ReconcilerRfc3339, ParsesUtcOffsetsAndFractions) {
  EXPECT_EQ(Rfc("2026-11-30T02:00:00Z"), "2026-11-30T02:00:00.000Z/0");
  EXPECT_EQ(Rfc("2026-11-29T23:00:00-03:00"), "2026-11-30T02:00:00.000Z/0");
  EXPECT_EQ(Rfc("2026-11-30T05:30:00+03:30"), "2026-11-30T02:00:00.000Z/0");
  EXPECT_EQ(Rfc("2026-11-30t02:00:00.123456789z"), "2026-11-30T02:00:00.123Z/123456");
  EXPECT_EQ(Rfc("2024-02-29T00:00:00Z"), "2024-02-29T00:00:00.000Z/0");
  for (const auto* bad : {"", "2026-11-30", "2026-11-30T02:00:00", "2026-11-30 02:00:00Z", "2026-02-30T00:00:00Z",
                          "2026-11-30T24:00:00Z", "2026-11-30T02:00:00.Z", "2026-11-30T02:00:00+0300",
                          "2026-11-30T02:00:00Zjunk"}) {
    EXPECT_EQ(Rfc(bad), "invalid") << bad;
  }
}

TEST(ReconcilerCommandLineTest, SweepIsTheDefaultAndWindowNeedsItsBounds) {
  auto cl = ParseCommandLine({});
  EXPECT_EQ(cl.command, CommandLine::Command::kSweep);
  cl = ParseCommandLine({"sweep"});
  EXPECT_EQ(cl.command, CommandLine::Command::kSweep);
  cl = ParseCommandLine({"window", "--from", "2026-11-30T01:00:00Z", "--to", "2026-11-30T02:00:00Z", "--output",
                         "/tmp/r.json"});
  EXPECT_EQ(cl.command, CommandLine::Command::kWindow);
  EXPECT_EQ(cl.to - cl.from, 1h);
  EXPECT_EQ(cl.output, "/tmp/r.json");

  auto problem = [](std::vector<std::string> args) {
    try {
      ParseCommandLine(args);
    } catch (const config::ConfigError& e) {
      EXPECT_EQ(e.key(), "argv");
      return e.problem();
    }
    return std::string("accepted");
  };
  EXPECT_THAT(problem({"window", "--from", "2026-11-30T01:00:00Z"}), HasSubstr("needs --from and --to"));
  EXPECT_THAT(problem({"window", "--from", "2026-11-30T02:00:00Z", "--to", "2026-11-30T01:00:00Z"}),
              HasSubstr("earlier"));
  EXPECT_THAT(problem({"window", "--from", "yesterday", "--to", "2026-11-30T01:00:00Z"}), HasSubstr("RFC 3339"));
  EXPECT_THAT(problem({"--from", "2026-11-30T01:00:00Z"}), HasSubstr("belong to the window"));
  EXPECT_THAT(problem({"sweep", "window"}), HasSubstr("unexpected argument 'window'"));
  EXPECT_THAT(problem({"window", "--last"}), HasSubstr("--last needs a value"));
  // --config is app::ParseCommandLine's, taken out before this parser runs.
  EXPECT_THAT(problem({"--config", "/etc/r.yaml"}), HasSubstr("unexpected argument '--config'"));
  EXPECT_THAT(problem({"window"}), HasSubstr("or --last"));
}

TEST(ReconcilerCommandLineTest, LastNamesATrailingWindowAndExcludesFixedBounds) {
  const auto cl = ParseCommandLine({"window", "--last", "1h", "--output", "/tmp/r.json"});
  EXPECT_EQ(cl.command, CommandLine::Command::kWindow);
  ASSERT_TRUE(cl.last.has_value());
  EXPECT_EQ(*cl.last, 1h);

  auto problem = [](std::vector<std::string> args) {
    try {
      ParseCommandLine(args);
    } catch (const config::ConfigError& e) {
      return e.problem();
    }
    return std::string("accepted");
  };
  EXPECT_THAT(problem({"window", "--last", "1h", "--from", "2026-11-30T01:00:00Z"}), HasSubstr("not both"));
  for (const auto* bad : {"60", "30s", "745h", "-1h", "1d", ""}) {
    EXPECT_THAT(problem({"window", "--last", bad}), HasSubstr("is not a duration")) << bad;
  }
  EXPECT_THAT(problem({"sweep", "--last", "1h"}), HasSubstr("belong to the window"));
}

TEST(ReconcilerTrailingWindow, TheLatestWholePeriodThatHasSettled) {
  const auto at = [](std::string_view t) { return *util::ParseRfc3339(t); };
  // Hourly at :30 with a 5 minute settle: the hour that ended at 10:00.
  auto w = TrailingWindow(at("2026-11-30T10:30:00Z"), 1h, 5min);
  EXPECT_EQ(util::FormatRfc3339(w.from), "2026-11-30T09:00:00.000Z");
  EXPECT_EQ(util::FormatRfc3339(w.to), "2026-11-30T10:00:00.000Z");
  // At 10:04 the hour that ended at 10:00 has not settled yet: the one before it.
  w = TrailingWindow(at("2026-11-30T10:04:59Z"), 1h, 5min);
  EXPECT_EQ(util::FormatRfc3339(w.to), "2026-11-30T09:00:00.000Z");
  w = TrailingWindow(at("2026-11-30T10:05:00Z"), 1h, 5min);
  EXPECT_EQ(util::FormatRfc3339(w.to), "2026-11-30T10:00:00.000Z");
  // A late or early firing lands on the same window: runs tile time, whatever minute they start.
  EXPECT_EQ(TrailingWindow(at("2026-11-30T10:59:59Z"), 1h, 5min).from, TrailingWindow(at("2026-11-30T10:06:00Z"), 1h, 5min).from);
  // Days are UTC days.
  w = TrailingWindow(at("2026-12-01T00:10:00-03:00"), 24h, 5min);
  EXPECT_EQ(util::FormatRfc3339(w.from), "2026-11-30T00:00:00.000Z");
  EXPECT_EQ(util::FormatRfc3339(w.to), "2026-12-01T00:00:00.000Z");
}

config::ConfigReader Reader(std::map<std::string, std::string> env, std::string yaml = "") {
  return config::ConfigReader::FromString(yaml, [env = std::move(env)](const std::string& name) {
    const auto it = env.find(name);
    return it == env.end() ? std::nullopt : std::optional(it->second);
  });
}

std::map<std::string, std::string> Required() {
  return {{"DATABASE_URL", "postgresql://x"}, {"ACQUIRER_URL", "http://127.0.0.1:8090"}, {"ACQUIRER_API_KEY", "k"}};
}

TEST(ReconcilerConfigTest, DefaultsMatchTheIssueAndTheLocalStackOverride) {
  auto env = Required();
  auto reader = Reader(env);
  const auto c = LoadConfig(reader);
  EXPECT_EQ(c.sweep.grace_period, 2min);
  EXPECT_EQ(c.sweep.decision.deadline, 1h);
  EXPECT_EQ(c.sweep.decision.not_found_policy, NotFoundPolicy::kResubmit);  // never `failed` from absence
  EXPECT_EQ(c.sweep.batch_size, 100);
  EXPECT_EQ(c.database.connections, 10u);
  EXPECT_TRUE(c.pushgateway.url.empty());

  env["RECONCILER_GRACE_PERIOD"] = "10s";  // what deploy/local/stack sets
  env["RECONCILER_NOT_FOUND_POLICY"] = "fail";  // the opt-in
  env["RECONCILER_BACKOFF_BASE"] = "200ms";
  auto overridden = Reader(env);
  const auto o = LoadConfig(overridden);
  EXPECT_EQ(o.sweep.grace_period, 10s);
  EXPECT_EQ(o.sweep.decision.not_found_policy, NotFoundPolicy::kFail);
  env["RECONCILER_NOT_FOUND_POLICY"] = "review";
  auto review = Reader(env);
  EXPECT_EQ(LoadConfig(review).sweep.decision.not_found_policy, NotFoundPolicy::kReview);
  EXPECT_EQ(o.sweep.decision.backoff.base, 200ms);
}

TEST(ReconcilerConfigTest, InconsistentValuesNameTheirKey) {
  auto key_of = [](std::map<std::string, std::string> extra, const std::string& yaml = "") {
    auto env = Required();
    env.insert(extra.begin(), extra.end());
    auto reader = Reader(env, yaml);
    try {
      LoadConfig(reader);
    } catch (const config::ConfigError& e) {
      return e.key();
    }
    return std::string("accepted");
  };
  EXPECT_EQ(key_of({{"RECONCILER_CLAIM_LEASE", "40s"}}), "reconciler.claim_lease");  // < 2 * (15 s + 10 s)
  EXPECT_EQ(key_of({{"RECONCILER_CLAIM_LEASE", "40s"}, {"ACQUIRER_REQUEST_TIMEOUT", "1s"},
                    {"ACQUIRER_RETRY_BACKOFF_BUDGET", "2s"}}),
            "accepted");
  EXPECT_EQ(key_of({{"RECONCILER_VISIBILITY_WINDOW", "2h"}}), "reconciler.visibility_window");
  EXPECT_EQ(key_of({{"RECONCILER_NOT_FOUND_POLICY", "guess"}}), "reconciler.not_found_policy");
  EXPECT_EQ(key_of({{"RECONCILER_BACKOFF_MAX", "1s"}}), "reconciler.backoff.max");
  EXPECT_EQ(key_of({}, "reconciler:\n  grace_periode: 1m\n"), "reconciler.grace_periode");
  EXPECT_EQ(key_of({}, "database:\n  url: postgresql://in-a-file\n"), "database.url");
  EXPECT_EQ(key_of({{"METRICS_PUSHGATEWAY_URL", "pushgateway:9091"}}), "metrics.pushgateway.url");
  EXPECT_EQ(key_of({{"METRICS_PUSHGATEWAY_URL", "http://pushgateway:9091"}}), "accepted");
  // Stripe: the deadline within the key's retention, the window over the search's lag.
  EXPECT_EQ(key_of({{"ACQUIRER_KIND", "stripe"}}), "accepted");
  EXPECT_EQ(key_of({{"ACQUIRER_KIND", "stripe"}, {"RECONCILER_DEADLINE", "23h"}}), "reconciler.deadline");
  EXPECT_EQ(key_of({{"RECONCILER_DEADLINE", "23h"}}), "accepted");  // our protocol keeps its keys
  EXPECT_EQ(key_of({{"ACQUIRER_KIND", "stripe"}, {"ACQUIRER_STRIPE_SEARCH_LAG", "10m"}}),
            "reconciler.visibility_window");
  EXPECT_EQ(key_of({{"ACQUIRER_KIND", "stripe"}, {"ACQUIRER_STRIPE_SEARCH_LAG", "10m"},
                    {"RECONCILER_VISIBILITY_WINDOW", "10m"}}),
            "accepted");
}

TEST(ReconcilerPushgateway, UrlParsing) {
  const auto a = ParsePushgatewayUrl("http://pushgateway.monitoring:9091");
  ASSERT_TRUE(a.has_value());
  EXPECT_EQ(a->host, "http://pushgateway.monitoring");
  EXPECT_EQ(a->port, "9091");
  EXPECT_EQ(ParsePushgatewayUrl("https://pg:443/")->host, "https://pg");
  for (const auto* bad :
       {"pushgateway:9091", "http://pushgateway", "http://pg:0", "http://pg:9091/x", "http://:9091"}) {
    EXPECT_FALSE(ParsePushgatewayUrl(bad).has_value()) << bad;
  }
}

TEST(ReconcilerRunSummaryTest, OneJsonLineWithEveryFigure) {
  RunSummary s;
  s.examined = 7;
  s.captured = 3;
  s.failed = 1;
  s.canceled = 1;
  s.needs_review = 1;
  s.still_pending = 1;
  s.errors = 2;
  s.duration = 1234ms;
  const auto line = SummaryLine(s, std::chrono::system_clock::time_point{});
  ASSERT_EQ(line.back(), '\n');
  EXPECT_EQ(line.find('\n'), line.size() - 1);
  const auto v = boost::json::parse(line).as_object();
  EXPECT_EQ(v.at("level").as_string(), "error");
  EXPECT_EQ(v.at("msg").as_string(), "run summary");
  EXPECT_EQ(v.at("mode").as_string(), "sweep");
  EXPECT_EQ(v.at("examined").as_int64(), 7);
  EXPECT_EQ(v.at("captured").as_int64(), 3);
  EXPECT_EQ(v.at("still_pending").as_int64(), 1);
  EXPECT_EQ(v.at("errors").as_int64(), 2);
  EXPECT_EQ(v.at("duration_ms").as_int64(), 1234);
  EXPECT_FALSE(v.contains("discrepancies"));

  s.errors = 0;
  s.mode = RunMode::kWindow;
  s.discrepancies["mismatch"] = 2;
  const auto w = boost::json::parse(SummaryLine(s, {})).as_object();
  EXPECT_EQ(w.at("level").as_string(), "info");
  EXPECT_EQ(w.at("discrepancies").at("mismatch").as_int64(), 2);
}

}  // namespace
}  // namespace charge_outbox::reconciler
