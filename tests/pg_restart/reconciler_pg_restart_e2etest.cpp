// The reconciler's claims across a PostgreSQL restart (issue 45): the real binary on a server of the test's
// own (OwnPostgres), the real acquirer-sim. A run claims every pending charge (its lease: owner_id and
// lease_expires_at, written in one statement and committed) and works through them slowly (the failpoint
// `reconciler.after_acquirer_lookup=sleep(...)`), and the server is restarted under it (fast shutdown,
// then immediate, one test each). The claims are rows, so they must outlive the server: a run started the
// moment the server is back takes none of them, and later runs, started as a CronJob would while the
// first is still working, take only the charges whose lease has ended, never one the first run is still
// acting on. In the end each charge is captured once: one terminal event, one capture at the acquirer, and
// no two lookups of one charge overlapping in time (acquirer_attempts, the audit trail of every call), and
// no lookup the acquirer received that is not on record. A third test keeps the server down 8 s, longer
// than the lease: the run holding the claims fails loudly and sends nothing more, the next runs resolve.
#include <gtest/gtest.h>

#include <boost/json/parse.hpp>
#include <boost/json/serialize.hpp>

#include <pqxx/pqxx>

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <iostream>
#include <memory>
#include <regex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "charge_stack.hpp"
#include "http_test_client.hpp"
#include "own_postgres.hpp"
#include "service_process.hpp"
#include "test_env.hpp"

namespace charge_outbox::testing {
namespace {

namespace fs = std::filesystem;
namespace json = boost::json;
using namespace std::chrono_literals;

constexpr const char* kMerchant = "00000000-0000-4000-8000-0000000045bb";
constexpr const char* kAcquirerKey = "ak_test_reconciler_pg_restart";
constexpr int kCharges = 16;
constexpr auto kLease = 6s;

// Pending charges as charge-api leaves them when it dies after its capture: the charge, its initiated
// event and attempt 1 (a capture by charge-api, never finished), created a minute ago, keys key-1..key-N.
constexpr const char* kInsertPending =
    "WITH ins AS ("
    " INSERT INTO charges (id, merchant_id, idempotency_key, request_fingerprint, order_id, amount, currency,"
    "  payment_method, last_sequence, attempt_count, created_at, updated_at)"
    " SELECT gen_random_uuid(), $1::uuid, 'key-' || i, sha256(('fp' || i)::bytea), 'PED-' || i, 2000 + i, 'BRL',"
    "  'pm_tok_visa', 1, 1, now() - interval '1 minute' + i * interval '1 millisecond',"
    "  now() - interval '1 minute' + i * interval '1 millisecond'"
    " FROM generate_series(1, $2::int) AS i RETURNING *"
    "), ev AS ("
    " INSERT INTO outbox (id, aggregateid, type, payload, sequence, shard)"
    " SELECT gen_random_uuid(), charge_public_id(ins.id), 'payments.charge.initiated.v1',"
    "  charge_event_payload(ROW(ins.*)::charges), 1, outbox_shard(ins.id) FROM ins"
    ") INSERT INTO acquirer_attempts (charge_id, attempt_no, request_id, operation, actor, started_at)"
    " SELECT ins.id, 1, gen_random_uuid(), 'capture', 'charge-api', ins.created_at FROM ins";

// Two lookups of one charge whose times overlap: two actors (or one twice) on the charge at once. A lookup
// never finished on record counts as acting until its lease would have ended.
constexpr const char* kOverlappingLookups =
    "SELECT count(*) FROM acquirer_attempts a JOIN acquirer_attempts b"
    "  ON a.charge_id = b.charge_id AND a.attempt_no < b.attempt_no"
    " WHERE a.actor = 'reconciler' AND b.actor = 'reconciler' AND a.operation = 'lookup' AND b.operation = 'lookup'"
    "   AND b.started_at < coalesce(a.finished_at, a.started_at + $1::interval)"
    "   AND a.started_at < coalesce(b.finished_at, b.started_at + $1::interval)";

json::object SummaryOf(const std::string& output) {
  std::istringstream lines(output);
  std::string line;
  while (std::getline(lines, line)) {
    if (line.find("\"msg\":\"run summary\"") != std::string::npos) return json::parse(line).as_object();
  }
  return {};
}

std::int64_t Field(const json::object& summary, const char* name) {
  const auto* v = summary.if_contains(name);
  return v != nullptr && v->is_int64() ? v->as_int64() : -1;
}

std::size_t Occurrences(const std::string& text, const std::string& what) {
  std::size_t n = 0;
  for (auto at = text.find(what); at != std::string::npos; at = text.find(what, at + what.size())) ++n;
  return n;
}

class ReconcilerPgRestartFixture : public ::testing::Test {
 protected:
  void SetUp() override {
    server_ = std::make_unique<OwnPostgres>(PROJECT_ROOT, "reconciler_pg_restart");
    // Durable commits, as in production: the throwaway cluster runs with synchronous_commit off, and an
    // immediate shutdown would then lose claims the run was told had committed.
    Exec("ALTER DATABASE postgres SET synchronous_commit = on");
    const auto migrated = RunProcess({CHARGE_MIGRATE_BIN, "up"}, {{"DATABASE_URL", server_->url()}}, 120s);
    ASSERT_EQ(migrated.exit_code, 0) << migrated.out << migrated.err;
    Exec("INSERT INTO merchants (id, name) VALUES ($1::uuid, 'reconciler pg restart')", {kMerchant});
    Exec(kInsertPending, {kMerchant, std::to_string(kCharges)});
    dir_ = fs::temp_directory_path() / UniqueName("reconciler_pg_restart");
    sim_ = std::make_unique<ServiceProcess>(std::vector<std::string>{ACQUIRER_SIM_BIN},
                                            EnvChanges{{"HTTP_PORT", "0"},
                                                       {"DATA_DIR", (dir_ / "sim").string()},
                                                       {"AUTH_API_KEYS", kAcquirerKey}});
    sim_client_ = std::make_unique<HttpTestClient>(sim_->port());
    // Each captured at the acquirer, as if charge-api had died after every capture: a lookup finds it.
    for (int i = 1; i <= kCharges; ++i) {
      const auto key = "key-" + std::to_string(i);
      const auto body = json::serialize(json::object{{"amount", 2000 + i},
                                                     {"currency", "BRL"},
                                                     {"reference", Scalar("SELECT charge_public_id(id) FROM charges"
                                                                          " WHERE idempotency_key = $1", {key})},
                                                     {"payment_method", "pm_tok_visa"}});
      const auto r = sim_client_->Post("/v1/captures", body,
                                       {{"Authorization", std::string("Bearer ") + kAcquirerKey},
                                        {"Idempotency-Key", std::string(kMerchant) + ":" + key}});
      ASSERT_EQ(r.status(), 201u) << r.response.body();
    }
  }

  void TearDown() override {
    sim_client_.reset();
    sim_.reset();
    server_.reset();
    fs::remove_all(dir_);
  }

  void Exec(const std::string& sql, const std::vector<std::string>& params = {}) const { Scalar(sql, params); }
  std::string Scalar(const std::string& sql, const std::vector<std::string>& params = {}) const {
    pqxx::connection conn(server_->url());
    pqxx::nontransaction tx(conn);
    const auto r = tx.exec_params(sql, pqxx::prepare::make_dynamic_params(params));
    return r.empty() || r[0].empty() || r[0][0].is_null() ? "" : r[0][0].as<std::string>();
  }

  // Short acquirer timeouts; a lease of kLease (the shortest the config accepts with them is 4 s).
  EnvChanges Env(const EnvChanges& extra = {}) const {
    auto env = FastAcquirerClientEnv(server_->url(), sim_->port(), kAcquirerKey);
    env["RECONCILER_GRACE_PERIOD"] = "1s";
    env["RECONCILER_CLAIM_LEASE"] = std::to_string(kLease.count()) + "s";
    env["RECONCILER_BACKOFF_BASE"] = "100ms";
    env["RECONCILER_BACKOFF_MAX"] = "200ms";
    env["METRICS_PUSHGATEWAY_URL"] = std::nullopt;
    for (const auto& [k, v] : extra) env[k] = v;
    return env;
  }

  // Run A: two charges at a time, each stalled 1.5 s after its lookup, so that 16 charges take it about
  // 12 s and the charges it reaches last have outlived their first lease. Returns once A holds all 16
  // claims and sleeps after its first two lookups; the leases as they stand then are kept in the
  // database (durably) as claims_at_restart, with the time they were read.
  std::unique_ptr<ChildProcess> StartSlowRunHoldingEveryClaim() {
    auto a = std::make_unique<ChildProcess>(
        std::vector<std::string>{RECONCILER_BIN},
        Env({{"FAILPOINTS", "reconciler.after_acquirer_lookup=sleep(1500)"},
             {"RECONCILER_CONCURRENCY", "2"},
             {"INSTANCE_ID", "run-a"}}));
    const bool holding = Eventually(
        [&] {
          return Scalar("SELECT count(*) FROM charges WHERE owner_id LIKE 'reconciler/run-a/%'") ==
                     std::to_string(kCharges) &&
                 Scalar("SELECT count(*) FROM acquirer_attempts WHERE actor = 'reconciler'") == "2";
        },
        15s);
    EXPECT_TRUE(holding) << a->CurrentOutput();
    Exec("CREATE TABLE claims_at_restart AS SELECT id, owner_id, lease_expires_at, now() AS read_at FROM charges");
    return a;
  }

  // Runs every 300 ms, as an impatient CronJob, while A works on and until nothing is pending (40 s at most).
  struct LaterRuns {
    int count = 0;
    int idle = 0;  // runs that examined nothing
    std::int64_t examined = 0;
    std::int64_t captured = 0;
    std::string last_output;
  };
  // `idle_before`: runs that examined nothing already, to be counted with these.
  LaterRuns RunUntilResolved(ChildProcess& a, int idle_before = 0) {
    LaterRuns runs;
    runs.idle = idle_before;
    const auto until = std::chrono::steady_clock::now() + 40s;
    while (std::chrono::steady_clock::now() < until &&
           (a.Running() || Scalar("SELECT count(*) FROM charges WHERE status = 'pending'") != "0")) {
      const auto run = RunProcess({RECONCILER_BIN}, Env({{"INSTANCE_ID", "run-" + std::to_string(++runs.count)}}), 30s);
      const auto summary = SummaryOf(run.out + run.err);
      runs.examined += std::max<std::int64_t>(Field(summary, "examined"), 0);
      runs.captured += std::max<std::int64_t>(Field(summary, "captured"), 0);
      if (Field(summary, "examined") == 0) ++runs.idle;
      runs.last_output = run.out + run.err;
      EXPECT_EQ(run.exit_code, 0) << runs.last_output;
      std::this_thread::sleep_for(300ms);
    }
    return runs;
  }

  // The end of every test: each charge captured once (one terminal event, one capture at the acquirer),
  // and never two runs on one charge at once: no two lookups of a charge overlapping in time, and every
  // lookup the acquirer received on record (none sent by a run that had lost the charge or could not say
  // so). A run that examined nothing makes one lookup of a key nobody uses, its credential check.
  void ExpectCapturedOnceOneRunAtATime(std::int64_t captured_by_runs, int idle_runs) {
    EXPECT_EQ(Scalar("SELECT count(*) FROM charges WHERE status = 'pending'"), "0");
    EXPECT_EQ(Scalar("SELECT count(*) FROM charges WHERE status = 'captured'"), std::to_string(kCharges));
    EXPECT_EQ(Scalar("SELECT count(*) FROM outbox WHERE type = 'payments.charge.captured.v1'"),
              std::to_string(kCharges));
    EXPECT_EQ(Scalar("SELECT count(*) FROM outbox WHERE type <> 'payments.charge.initiated.v1'"),
              std::to_string(kCharges))
        << "a second terminal event";
    EXPECT_EQ(captured_by_runs, kCharges);
    const auto ledger = AcquirerLedger(*sim_client_);
    EXPECT_EQ(ledger.size(), static_cast<std::size_t>(kCharges)) << json::serialize(ledger);
    for (int i = 1; i <= kCharges; ++i) {
      EXPECT_EQ(AcquirerLedgerCount(*sim_client_, "capture", std::string(kMerchant) + ":key-" + std::to_string(i)),
                1u);
    }
    const auto lease = std::to_string(kLease.count()) + " seconds";
    EXPECT_EQ(Scalar(kOverlappingLookups, {lease}), "0")
        << Scalar("SELECT string_agg(c.idempotency_key || '#' || a.attempt_no || ' ' || a.started_at::time || '-' ||"
                  " coalesce(a.finished_at::time::text, 'unfinished'), ', ' ORDER BY c.idempotency_key, a.attempt_no)"
                  " FROM acquirer_attempts a JOIN charges c ON c.id = a.charge_id WHERE a.actor = 'reconciler'");
    const auto stats = sim_client_->Get("/admin/stats").json().as_object();
    EXPECT_EQ(stats.at("requests").at("lookup").as_int64(), std::stoll(LookupsOnRecord()) + idle_runs);
  }

  std::string LookupsOnRecord() const {
    return Scalar("SELECT count(*) FROM acquirer_attempts WHERE actor = 'reconciler' AND operation = 'lookup'");
  }
  std::string UnfinishedLookups() const {
    return Scalar("SELECT count(*) FROM acquirer_attempts WHERE actor = 'reconciler' AND finished_at IS NULL");
  }

  std::unique_ptr<OwnPostgres> server_;
  fs::path dir_;
  std::unique_ptr<ServiceProcess> sim_;
  std::unique_ptr<HttpTestClient> sim_client_;
};

class ReconcilerPgRestartE2E : public ReconcilerPgRestartFixture,
                               public ::testing::WithParamInterface<OwnPostgres::Shutdown> {};

TEST_P(ReconcilerPgRestartE2E, ClaimsOutliveTheServerAndEachChargeIsResolvedOnceByOneRunAtATime) {
  const char* name = GetParam() == OwnPostgres::Shutdown::kFast ? "fast" : "immediate";
  auto a = StartSlowRunHoldingEveryClaim();
  const auto a_owner = Scalar("SELECT min(owner_id) FROM charges");
  const auto restarted_at = std::chrono::steady_clock::now();
  server_->Restart(GetParam());  // while A sleeps after its first two lookups, holding all 16 claims
  const auto back_at = std::chrono::steady_clock::now();

  // The claims outlived the server: every charge still pending is still A's, its lease still running.
  EXPECT_EQ(Scalar("SELECT count(*) FROM charges WHERE status = 'pending'"
                   " AND (owner_id IS DISTINCT FROM $1 OR lease_expires_at <= now())",
                   {a_owner}),
            "0")
      << Scalar("SELECT string_agg(idempotency_key || ' ' || status || ' ' || coalesce(owner_id, '-'), ', ')"
                " FROM charges");
  // A run started the moment the server is back honours them: it examines nothing.
  const auto b = RunProcess({RECONCILER_BIN}, Env({{"INSTANCE_ID", "run-b"}}), 30s);
  const auto b_summary = SummaryOf(b.out + b.err);
  EXPECT_EQ(Field(b_summary, "examined"), 0) << b.out << b.err;
  EXPECT_EQ(b.exit_code, 0) << b.out << b.err;

  // Then later runs take what A's leases let go, while A works on.
  const auto later = RunUntilResolved(*a, Field(b_summary, "examined") == 0 ? 1 : 0);
  const auto resolved_at = std::chrono::steady_clock::now();
  const auto a_result = a->Wait(30s);
  const auto a_output = a_result.out + a_result.err;
  const auto a_summary = SummaryOf(a_output);
  ASSERT_FALSE(a_summary.empty()) << "run A wrote no summary\n" << a_output;
  ExpectCapturedOnceOneRunAtATime(Field(a_summary, "captured") + later.captured, later.idle);

  // Each charge looked up once, by one run. The charges A left alone ("no longer ours") were taken over,
  // and only once the lease A held at the restart had ended.
  EXPECT_EQ(LookupsOnRecord(), std::to_string(kCharges));
  std::string taken = "{";
  const std::regex left_alone(R"(charge (ch_[0-9a-f]+): no longer ours)");
  for (auto it = std::sregex_iterator(a_output.begin(), a_output.end(), left_alone); it != std::sregex_iterator();
       ++it) {
    taken += (taken.size() > 1 ? "," : "") + (*it)[1].str();
  }
  taken += "}";
  const auto taken_over = Scalar("SELECT count(*) FROM charges WHERE charge_public_id(id) = ANY($1::text[])", {taken});
  EXPECT_EQ(std::stoll(taken_over), Field(a_summary, "already_resolved")) << taken;
  EXPECT_EQ(Scalar("SELECT count(*) FROM acquirer_attempts a JOIN claims_at_restart s ON s.id = a.charge_id"
                   " WHERE a.actor = 'reconciler' AND a.operation = 'lookup'"
                   "   AND charge_public_id(a.charge_id) = ANY($1::text[]) AND a.started_at < s.lease_expires_at",
                   {taken}),
            "0")
      << "a charge taken over before the lease it had at the restart ended";

  const auto replaced = Occurrences(a_output, "closed and replaced");
  const auto ms = [](auto d) { return std::chrono::duration_cast<std::chrono::milliseconds>(d).count(); };
  std::cout << "[ figures  ] " << name << " restart: server down and up in " << ms(back_at - restarted_at)
            << " ms; run A (exit " << a_result.exit_code << ") examined " << Field(a_summary, "examined")
            << ", captured " << Field(a_summary, "captured") << ", left alone " << Field(a_summary, "already_resolved")
            << ", errors " << Field(a_summary, "errors") << ", pooled connections replaced " << replaced
            << "; the run at once examined " << Field(b_summary, "examined") << "; " << later.count
            << " later runs examined " << later.examined << ", captured " << later.captured << "; all resolved "
            << ms(resolved_at - back_at) << " ms after the server was back; " << LookupsOnRecord() << " lookups, "
            << UnfinishedLookups() << " unfinished on record\n";
  // A lost nothing to the restart: its dead pooled connections were replaced, without an error.
  EXPECT_EQ(UnfinishedLookups(), "0") << a_output;
  EXPECT_EQ(Field(a_summary, "errors"), 0) << "run A lost work to the restart\n" << a_output;
  EXPECT_EQ(a_result.exit_code, 0) << a_output;
  EXPECT_GE(replaced, 1u) << a_output;
}

// The server down 8 s, longer than the lease (6 s) and than the few quick retries a run gives a statement:
// the run holding the claims fails what it was doing, loudly (errors, exit 1), and sends nothing more;
// its claims expire; the next runs, once the server is back, resolve every charge, once.
class ReconcilerPgOutageE2E : public ReconcilerPgRestartFixture {};

TEST_F(ReconcilerPgOutageE2E, ARunThatLosesItsServerLongerThanItsLeaseFailsLoudlyAndTheNextRunsResolveOnce) {
  auto a = StartSlowRunHoldingEveryClaim();
  const auto restarted_at = std::chrono::steady_clock::now();
  server_->Restart(OwnPostgres::Shutdown::kImmediate, 8s);
  const auto back_at = std::chrono::steady_clock::now();
  const auto later = RunUntilResolved(*a);
  const auto resolved_at = std::chrono::steady_clock::now();
  const auto a_result = a->Wait(30s);
  const auto a_output = a_result.out + a_result.err;
  const auto a_summary = SummaryOf(a_output);
  ASSERT_FALSE(a_summary.empty()) << "run A wrote no summary\n" << a_output;
  EXPECT_EQ(a_result.exit_code, 1) << a_output;
  EXPECT_GT(Field(a_summary, "errors"), 0) << a_output;
  ExpectCapturedOnceOneRunAtATime(Field(a_summary, "captured") + later.captured, later.idle);
  // Nothing was looked up while the lease of the run that held it at the outage still ran, but by that run.
  EXPECT_EQ(Scalar("SELECT count(*) FROM acquirer_attempts a JOIN claims_at_restart s ON s.id = a.charge_id"
                   " WHERE a.actor = 'reconciler' AND a.operation = 'lookup' AND a.started_at > s.read_at"
                   "   AND a.started_at < s.lease_expires_at"),
            "0");

  const auto ms = [](auto d) { return std::chrono::duration_cast<std::chrono::milliseconds>(d).count(); };
  std::cout << "[ figures  ] immediate shutdown, down " << ms(back_at - restarted_at) << " ms: run A (exit "
            << a_result.exit_code << ") examined " << Field(a_summary, "examined") << ", captured "
            << Field(a_summary, "captured") << ", errors " << Field(a_summary, "errors") << "; " << later.count
            << " later runs examined " << later.examined << ", captured " << later.captured << "; all resolved "
            << ms(resolved_at - back_at) << " ms after the server was back; " << LookupsOnRecord() << " lookups, "
            << UnfinishedLookups() << " unfinished on record\n";
}

INSTANTIATE_TEST_SUITE_P(Shutdowns, ReconcilerPgRestartE2E,
                         ::testing::Values(OwnPostgres::Shutdown::kFast, OwnPostgres::Shutdown::kImmediate),
                         [](const ::testing::TestParamInfo<OwnPostgres::Shutdown>& shutdown) {
                           return std::string(shutdown.param == OwnPostgres::Shutdown::kFast ? "Fast" : "Immediate");
                         });

}  // namespace
}  // namespace charge_outbox::testing
