// The inbox across a PostgreSQL restart (issue 45): settlement-projection, the real binary, with its own
// database on a server of the test's own (OwnPostgres), consuming a fresh topic that the real outbox-relay
// feeds from a source database on the shared test server (the settlement-projection e2e fixture). Charges
// keep being written and published while the projection's server is restarted (fast shutdown; immediate;
// immediate and kept down 8 s, as long as a failover, one test each): the consumer's connection (one per
// member, outside any pool) dies with the server, and the daemon must retry its batch on a new connection
// without exiting. Then every event is applied exactly once (the inbox holds each event once, each charge's
// progress is its last sequence, the totals equal the source's), and the projection resumes within one
// backoff ceiling (inbox.backoff.max) of the server's return and catches up, both measured.
#include <gtest/gtest.h>

#include <pqxx/pqxx>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <iostream>
#include <string>
#include <thread>

#include "http_test_client.hpp"
#include "own_postgres.hpp"
#include "projection_fixture.hpp"
#include "test_env.hpp"

namespace charge_outbox::testing {
namespace {

using namespace std::chrono_literals;

constexpr const char* kApplied = R"(inbox_events_total{outcome="applied"})";
constexpr const char* kDuplicate = R"(inbox_events_total{outcome="duplicate"})";
constexpr const char* kRejected = R"(inbox_events_total{outcome="rejected"})";
constexpr const char* kBatchFailures = "inbox_batch_failures_total";

// Captured count and amount per (merchant, UTC day, currency), as one line: the source's captured charges
// (day of updated_at) and the projection's captured_totals must print the same.
constexpr const char* kSourceTotals =
    "SELECT coalesce(string_agg(k || '=' || n || '/' || a, ',' ORDER BY k), '') FROM ("
    " SELECT merchant_id::text || '|' || (updated_at AT TIME ZONE 'UTC')::date::text || '|' || currency AS k,"
    "        count(*) AS n, sum(amount) AS a FROM charges WHERE status = 'captured' GROUP BY 1) t";
constexpr const char* kProjectionTotals =
    "SELECT coalesce(string_agg(k || '=' || n || '/' || a, ',' ORDER BY k), '') FROM ("
    " SELECT merchant_id::text || '|' || day::text || '|' || currency AS k, captured_count AS n,"
    "        captured_amount AS a FROM captured_totals WHERE captured_count <> 0 OR captured_amount <> 0) t";
// Each charge and its last sequence, as a digest with the count: the events written per charge in the
// source, the last sequence applied per charge in the projection's inbox.
constexpr const char* kSourceProgress =
    "SELECT count(*) || ' charges, ' || coalesce(sum(n), 0) || ' events, '"
    "       || md5(coalesce(string_agg(aggregateid || ':' || n, ',' ORDER BY aggregateid), ''))"
    "  FROM (SELECT aggregateid, count(*) AS n FROM outbox GROUP BY 1) t";
constexpr const char* kInboxProgress =
    "SELECT count(*) || ' charges, ' || coalesce(sum(last_sequence), 0) || ' events, '"
    "       || md5(coalesce(string_agg(charge_id || ':' || last_sequence, ',' ORDER BY charge_id), ''))"
    "  FROM inbox_charges";

std::string ScalarAt(const std::string& url, const std::string& sql) {
  pqxx::connection conn(url);
  pqxx::nontransaction tx(conn);
  const auto r = tx.exec(sql);
  return r.empty() || r[0][0].is_null() ? "" : r[0][0].as<std::string>();
}

std::int64_t CountAt(const std::string& url, const std::string& sql) { return std::stoll(ScalarAt(url, sql)); }

// The inbox's default backoff ceiling (inbox.backoff.max): after an outage, the longest wait for the next try.
constexpr auto kBackoffMax = 5s;

class InboxPgRestartE2E : public ::testing::TestWithParam<PgOutage> {};

TEST_P(InboxPgRestartE2E, TheProjectionSurvivesAppliesEveryEventOnceAndCatchesUp) {
  const auto outage = GetParam();
  const auto name = outage.Name();
  ProjectionE2E f("inbox_restart_" + name);
  OwnPostgres server(PROJECT_SOURCE_DIR, "inbox_pg_restart");
  {
    pqxx::connection conn(server.url());
    pqxx::nontransaction tx(conn);
    tx.exec("CREATE DATABASE settlement");
    // Durable commits, as in production: the throwaway cluster runs with synchronous_commit off, and an
    // immediate shutdown would then lose transactions the inbox was told had committed.
    tx.exec("ALTER DATABASE settlement SET synchronous_commit = on");
  }
  const auto url = server.url("settlement");
  const auto migrated =
      RunProcess({SETTLEMENT_PROJECTION_BIN, "migrate"}, f.ProjectionEnv({{"DATABASE_URL", url}}), 60s);
  ASSERT_EQ(migrated.exit_code, 0) << migrated.out << migrated.err;

  const auto merchants = f.AddMerchants(4);
  auto relay = f.source().StartRelay();
  // Default backoff (200 ms doubling to 5 s): the catch-up measured is the one production gets.
  auto projection = f.StartProjection({{"DATABASE_URL", url}, {"INBOX_BATCH_SIZE", "100"}});
  ASSERT_TRUE(Eventually([&] { return Metric(*projection, "inbox_assigned_partitions") == 6.0; }, 20s))
      << projection->Output();
  const auto caught_up = [&] { return ScalarAt(url, kInboxProgress) == f.source_db().Scalar(kSourceProgress); };
  f.WriteCharges(merchants, 200);
  ASSERT_TRUE(Eventually(caught_up, 30s)) << projection->Output();

  // Charges written in small waves, published by the relay, through the restart and a second after it.
  std::atomic<bool> stop{false};
  std::thread writer([&] {
    while (!stop.load()) {
      f.WriteCharges(merchants, 20);
      std::this_thread::sleep_for(50ms);
    }
  });
  const double applied_before = Metric(*projection, kApplied);
  const bool streaming = Eventually([&] { return Metric(*projection, kApplied) >= applied_before + 100; }, 15s);
  const auto failures_before = Metric(*projection, kBatchFailures);
  const auto restarted_at = std::chrono::steady_clock::now();
  server.Restart(outage.how, outage.down_for);  // returns once the new server accepts connections
  const auto back_at = std::chrono::steady_clock::now();
  const auto in_inbox_at_back = CountAt(url, "SELECT count(*) FROM inbox");
  const auto written_at_back = CountAt(f.source_db().url(), "SELECT count(*) FROM outbox");
  const bool resumed = Eventually([&] { return CountAt(url, "SELECT count(*) FROM inbox") > in_inbox_at_back; }, 20s);
  const auto resumed_at = std::chrono::steady_clock::now();
  std::this_thread::sleep_until(back_at + 1s);
  stop.store(true);
  writer.join();
  const auto stopped_at = std::chrono::steady_clock::now();
  ASSERT_TRUE(streaming) << "the projection was not applying when the server went\n" << projection->Output();
  ASSERT_TRUE(resumed) << name << ": nothing applied 20 s after the server was back\n"
                       << projection->Output();
  ASSERT_TRUE(Eventually([&] { return Unpublished(f.source_db()) == 0; }, 30s)) << relay->Output();
  ASSERT_TRUE(Eventually(caught_up, 30s))
      << name << ": the projection did not catch up: inbox " << ScalarAt(url, kInboxProgress)
      << ", source " << f.source_db().Scalar(kSourceProgress) << "\n" << projection->Output();
  const auto caught_up_at = std::chrono::steady_clock::now();
  ASSERT_TRUE(Eventually([&] { return f.OffsetsCommitted(); }, 10s));

  // The daemon lived through it, and says it is alive and ready.
  ASSERT_TRUE(projection->process().Running()) << name << ": the projection exited\n"
                                               << projection->Output();
  HttpTestClient admin(projection->admin_port());
  EXPECT_EQ(admin.Get("/healthz").status(), 200u);
  EXPECT_TRUE(Eventually([&] { return admin.Get("/readyz").status() == 200u; }, 5s)) << projection->Output();

  // Exactly once: each event in the inbox once, each charge at its last sequence, the totals the source's.
  const auto written = CountAt(f.source_db().url(), "SELECT count(*) FROM outbox");
  EXPECT_EQ(CountAt(url, "SELECT count(*) FROM inbox"), written);
  EXPECT_EQ(ScalarAt(url, kInboxProgress), f.source_db().Scalar(kSourceProgress));
  const auto totals = f.source_db().Scalar(kSourceTotals);
  ASSERT_FALSE(totals.empty()) << "a test of nothing";
  EXPECT_EQ(ScalarAt(url, kProjectionTotals), totals);
  EXPECT_EQ(ScalarAt(url, "SELECT (SELECT count(*) FROM inbox_held) + (SELECT count(*) FROM inbox_gaps)"
                          " + (SELECT count(*) FROM inbox_rejected) + (SELECT count(*) FROM inbox_expired)"),
            "0");
  // What the metrics show: an event is counted applied when its batch's commit was answered; a batch whose
  // commit's answer was lost with the server is read again and its events counted as duplicates.
  const auto applied = Metric(*projection, kApplied);
  const auto duplicates = Metric(*projection, kDuplicate);
  EXPECT_LE(applied, static_cast<double>(written));
  EXPECT_GE(applied + duplicates, static_cast<double>(written));
  EXPECT_EQ(Metric(*projection, kRejected), 0.0);
  EXPECT_GT(Metric(*projection, kBatchFailures), failures_before) << "the consumer never met the outage";

  const auto ms = [](auto d) { return std::chrono::duration_cast<std::chrono::milliseconds>(d).count(); };
  std::cout << "[ figures  ] " << name << ": server down and up in " << ms(back_at - restarted_at)
            << " ms, " << written_at_back - in_inbox_at_back << " events written and not yet applied when it was back;"
            << " first batch applied " << ms(resumed_at - back_at) << " ms after it accepted connections;"
            << " caught up " << ms(caught_up_at - stopped_at) << " ms after the last write ("
            << ms(caught_up_at - back_at) << " ms after the server was back); " << written << " events, applied "
            << applied << ", duplicates " << duplicates << ", failed batches "
            << Metric(*projection, kBatchFailures) - failures_before << "\n";
  // Bounds: the first batch within one backoff ceiling of the server's return, all caught up soon after.
  EXPECT_LT(resumed_at - back_at, kBackoffMax + 1s);
  EXPECT_LT(caught_up_at - back_at, 15s) << "catch-up bound";
}

INSTANTIATE_TEST_SUITE_P(Outages, InboxPgRestartE2E,
                         ::testing::Values(PgOutage{OwnPostgres::Shutdown::kFast},
                                           PgOutage{OwnPostgres::Shutdown::kImmediate},
                                           PgOutage{OwnPostgres::Shutdown::kImmediate, 8s}),
                         [](const ::testing::TestParamInfo<PgOutage>& outage) { return outage.param.Name(); });

}  // namespace
}  // namespace charge_outbox::testing
