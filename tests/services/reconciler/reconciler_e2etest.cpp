// The reconciler as it runs: the real binary, one process per run, against a real PostgreSQL and the
// real acquirer-sim (and the real charge-api where a test needs one). Every branch of the decision table,
// overlapping runs, a crash at its failpoint, a charge-api takeover racing it, the window report, and the
// metrics push.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <boost/json/parse.hpp>
#include <boost/json/serialize.hpp>

#include <csignal>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <set>
#include <sstream>
#include <thread>

#include "charge_outbox/http/server.hpp"
#include "charge_outbox/util/time.hpp"
#include "charge_stack.hpp"
#include "http_test_client.hpp"
#include "pg_test_database.hpp"
#include "service_process.hpp"
#include "test_env.hpp"
#include "window_report.hpp"

namespace charge_outbox::testing {
namespace {

namespace asio = boost::asio;
namespace fs = std::filesystem;
namespace json = boost::json;
using namespace std::chrono_literals;
using ::testing::HasSubstr;
using ::testing::Not;
using ::testing::UnorderedElementsAre;

constexpr const char* kMerchant = "00000000-0000-4000-8000-000000000001";
constexpr const char* kApiKey = "sk_test_reconciler_e2e";
constexpr const char* kAcquirerKey = "ak_test_reconciler_e2e";

struct RunResult {
  ProcessResult process;
  json::object summary;  // the run's summary line
};

class ReconcilerE2E : public ::testing::Test {
 protected:
  void SetUp() override {
    db_ = PgTestDatabase::Create(::testing::UnitTest::GetInstance()->current_test_info()->name(),
                                 PgTestDatabase::Schema::kMigrated);
    InsertMerchant(*db_, kMerchant, kApiKey);
    dir_ = fs::temp_directory_path() / UniqueName("reconciler_e2e");
    sim_ = std::make_unique<ServiceProcess>(std::vector<std::string>{ACQUIRER_SIM_BIN},
                                            EnvChanges{{"HTTP_PORT", "0"},
                                                       {"DATA_DIR", (dir_ / "sim").string()},
                                                       {"AUTH_API_KEYS", kAcquirerKey}});
    sim_client_ = std::make_unique<HttpTestClient>(sim_->port());
  }

  void TearDown() override {
    sim_client_.reset();
    sim_.reset();
    fs::remove_all(dir_);
  }

  // Short acquirer timeouts, lease and backoff, so unknown outcomes and rescheduled looks resolve in seconds.
  EnvChanges ReconcilerEnv(const EnvChanges& extra = {}) {
    EnvChanges env{{"DATABASE_URL", db_->url()},
                   {"ACQUIRER_URL", "http://127.0.0.1:" + std::to_string(sim_->port())},
                   {"ACQUIRER_API_KEY", kAcquirerKey},
                   {"ACQUIRER_REQUEST_TIMEOUT", "1s"},
                   {"ACQUIRER_RETRY_MAX_ATTEMPTS", "2"},
                   {"ACQUIRER_RETRY_BACKOFF_BASE", "50ms"},
                   {"ACQUIRER_RETRY_BACKOFF_MAX", "100ms"},
                   {"ACQUIRER_RETRY_BACKOFF_BUDGET", "1s"},
                   {"RECONCILER_GRACE_PERIOD", "1s"},
                   {"RECONCILER_CLAIM_LEASE", "4s"},
                   {"RECONCILER_BACKOFF_BASE", "100ms"},
                   {"RECONCILER_BACKOFF_MAX", "200ms"},
                   {"RECONCILER_VISIBILITY_WINDOW", "1s"},
                   {"FAILPOINTS", std::nullopt},
                   {"METRICS_PUSHGATEWAY_URL", std::nullopt}};
    for (const auto& [k, v] : extra) env[k] = v;
    return env;
  }

  static json::object SummaryOf(const std::string& output) {
    std::istringstream lines(output);
    std::string line;
    while (std::getline(lines, line)) {
      if (line.find("\"msg\":\"run summary\"") != std::string::npos) return json::parse(line).as_object();
    }
    return {};
  }

  RunResult RunReconciler(const EnvChanges& extra = {}, std::vector<std::string> args = {}) {
    args.insert(args.begin(), RECONCILER_BIN);
    RunResult run;
    run.process = RunProcess(args, ReconcilerEnv(extra), 60s);
    run.summary = SummaryOf(run.process.out + run.process.err);
    return run;
  }

  // Runs the reconciler until `done` holds (each run a process, as the CronJob would), or fails the test.
  template <class Done>
  void RunUntil(Done done, const EnvChanges& extra = {}, std::chrono::seconds limit = 20s) {
    const auto until = std::chrono::steady_clock::now() + limit;
    RunResult last;
    while (std::chrono::steady_clock::now() < until) {
      last = RunReconciler(extra);
      if (done()) return;
      std::this_thread::sleep_for(100ms);
    }
    FAIL() << "not done after " << limit.count() << " s; last run:\n" << last.process.out << last.process.err;
  }

  // Pending charges as charge-api leaves them when it dies after its intent: the charge, its initiated
  // event and attempt 1 (a capture, started and never finished), created `age` ago, keys prefix1..prefixN.
  void InsertPending(int n, const std::string& prefix, const std::string& age = "1 minute",
                     const std::string& payment_method = "pm_tok_visa") {
    db_->Execute(
        "WITH ins AS ("
        " INSERT INTO charges (id, merchant_id, idempotency_key, request_fingerprint, order_id, amount, currency,"
        "  payment_method, last_sequence, attempt_count, created_at, updated_at)"
        " SELECT gen_random_uuid(), '" + std::string(kMerchant) + "', '" + prefix + "' || i,"
        "  sha256(('fp' || i)::bytea),"
        "  'PED-' || i, 1000 + i, 'BRL', '" + payment_method + "', 1, 1,"
        "  now() - interval '" + age + "' + i * interval '1 microsecond',"
        "  now() - interval '" + age + "' + i * interval '1 microsecond'"
        " FROM generate_series(1, " + std::to_string(n) + ") AS i RETURNING *"
        "), ev AS ("
        " INSERT INTO outbox (id, aggregateid, type, payload, sequence, shard)"
        " SELECT gen_random_uuid(), charge_public_id(ins.id), 'payments.charge.initiated.v1',"
        "  charge_event_payload(ROW(ins.*)::charges), 1, outbox_shard(ins.id) FROM ins"
        ") INSERT INTO acquirer_attempts (charge_id, attempt_no, request_id, operation, actor, started_at)"
        " SELECT ins.id, 1, gen_random_uuid(), 'capture', 'charge-api', ins.created_at FROM ins");
  }

  // As charge-api leaves a charge it answered 202: attempt 1 finished, its outcome unknown.
  void AnsweredPending(const std::string& key) {
    db_->Execute("UPDATE acquirer_attempts a SET finished_at = a.started_at + interval '1 second',"
                 " outcome = 'timed_out', evidence = 'unknown' FROM charges c"
                 " WHERE a.charge_id = c.id AND a.attempt_no = 1 AND c.idempotency_key = '" + key + "'");
  }

  std::string Field(const std::string& key, const std::string& column) {
    return db_->Scalar("SELECT " + column + " FROM charges WHERE idempotency_key = '" + key + "'");
  }
  std::string PublicId(const std::string& key) { return Field(key, "charge_public_id(id)"); }
  std::string Status(const std::string& key) { return Field(key, "status"); }
  static std::string AcquirerKey(const std::string& key) { return std::string(kMerchant) + ":" + key; }

  // A capture at the acquirer for our charge `key`, as charge-api would have sent it (or with another amount).
  json::object CaptureAtAcquirer(const std::string& key, std::optional<std::int64_t> amount = std::nullopt,
                                 std::optional<std::string> reference = std::nullopt,
                                 const std::string& payment_method = "pm_tok_visa") {
    return CaptureWith(*sim_client_, key, amount ? *amount : std::stoll(Field(key, "amount")),
                       reference ? *reference : PublicId(key), payment_method);
  }

  static json::object CaptureWith(HttpTestClient& client, const std::string& key, std::int64_t amount,
                                  const std::string& reference, const std::string& payment_method = "pm_tok_visa") {
    const auto body = json::serialize(json::object{
        {"amount", amount}, {"currency", "BRL"}, {"reference", reference}, {"payment_method", payment_method}});
    const auto r = client.Post("/v1/captures", body,
                               {{"Authorization", std::string("Bearer ") + kAcquirerKey},
                                {"Idempotency-Key", AcquirerKey(key)}});
    EXPECT_TRUE(r.status() == 201u || r.status() == 402u) << r.response.body();
    return r.json().as_object();
  }

  void SetFaults(const std::string& profile) {
    const auto r = sim_client_->Put("/admin/faults", profile);
    ASSERT_EQ(r.status(), 200u) << r.response.body();
  }

  json::array Ledger() { return AcquirerLedger(*sim_client_); }

  std::size_t LedgerEntries(const std::string& type, const std::string& acquirer_key) {
    return AcquirerLedgerCount(*sim_client_, type, acquirer_key);
  }

  std::string TerminalEvents(const std::string& key) {
    return db_->Scalar("SELECT string_agg(type, ',' ORDER BY sequence) FROM outbox WHERE aggregateid = '" +
                       PublicId(key) + "' AND type <> 'payments.charge.initiated.v1'");
  }

  std::unique_ptr<ServiceProcess> StartChargeApi(EnvChanges extra = {}) {
    auto env = FastChargeApiEnv(db_->url(), sim_->port(), kAcquirerKey);
    for (auto& [k, v] : extra) env[k] = v;
    return std::make_unique<ServiceProcess>(std::vector<std::string>{CHARGE_API_BIN}, env);
  }

  static std::string ChargeBody() {
    return R"({"amount": 25000, "currency": "BRL", "order_id": "PED-0001", "payment_method": "pm_tok_visa"})";
  }
  static HttpHeaders ChargeHeaders(const std::string& key) {
    return {{"Authorization", std::string("Bearer ") + kApiKey},
            {"Content-Type", "application/json"},
            {"Idempotency-Key", key}};
  }

  std::unique_ptr<PgTestDatabase> db_;
  fs::path dir_;
  std::unique_ptr<ServiceProcess> sim_;
  std::unique_ptr<HttpTestClient> sim_client_;
};

// A wrong acquirer key fails the run as an error naming the key, even with nothing pending; with charges
// pending, each lookup's refusal is an error line with its HTTP status. The RunFailed runbook's lines exist.
TEST_F(ReconcilerE2E, RefusedAcquirerCredentialsFailTheRunLoudlyEvenWithNothingPending) {
  const auto run = RunReconciler({{"ACQUIRER_API_KEY", "ak_wrong_key"}});
  EXPECT_EQ(run.process.exit_code, 1) << run.process.out << run.process.err;
  const auto all = run.process.out + run.process.err;
  EXPECT_THAT(all, HasSubstr("\"level\":\"error\""));
  EXPECT_THAT(all, HasSubstr("the acquirer refuses our credentials (HTTP 401"));
  EXPECT_THAT(all, HasSubstr("acquirer.api_key"));
  EXPECT_THAT(all, Not(HasSubstr("ak_wrong_key"))) << "the key is never logged";
  EXPECT_EQ(run.summary.at("errors").as_int64(), 1);
  const auto window = RunReconciler({{"ACQUIRER_API_KEY", "ak_wrong_key"}},
                                    {"window", "--from", "2026-12-01T00:00:00Z", "--to", "2026-12-01T01:00:00Z"});
  EXPECT_EQ(window.process.exit_code, 1);
  // With the right key, the same empty run is clean.
  EXPECT_EQ(RunReconciler().process.exit_code, 0);

  InsertPending(1, "refused-");
  const auto with_work = RunReconciler({{"ACQUIRER_API_KEY", "ak_wrong_key"}});
  EXPECT_EQ(with_work.process.exit_code, 1);
  EXPECT_THAT(with_work.process.out + with_work.process.err, HasSubstr("stays pending (lookup_refused HTTP 401)"));
  EXPECT_EQ(Field("refused-1", "status"), "pending");
}

TEST_F(ReconcilerE2E, ChargeLeftPendingByAChargeApiCrashAfterCaptureEndsCapturedOnce) {
  auto api = StartChargeApi({{"FAILPOINTS", "charge.after_acquirer_response=crash"}});
  HttpTestClient client(api->port(), "127.0.0.1", 30s);
  const auto crashed = client.Post("/v1/charges", ChargeBody(), ChargeHeaders("crash-1"));
  EXPECT_FALSE(crashed.ok()) << "charge-api should die with the request, got " << crashed.status();
  EXPECT_EQ(api->process().Wait(10s).term_signal, SIGKILL);
  ASSERT_EQ(Status("crash-1"), "pending");
  ASSERT_EQ(LedgerEntries("capture", AcquirerKey("crash-1")), 1u);

  // The dead request's lease (3 s) keeps the reconciler off at first; a later run resolves the charge.
  RunUntil([&] { return Status("crash-1") == "captured"; }, {{"RECONCILER_GRACE_PERIOD", "0s"}});
  EXPECT_EQ(LedgerEntries("capture", AcquirerKey("crash-1")), 1u);
  EXPECT_EQ(TerminalEvents("crash-1"), "payments.charge.captured.v1");
  EXPECT_EQ(Field("crash-1", "acquirer_capture_id"), std::string(Ledger().at(0).at("id").as_string()));
  EXPECT_EQ(db_->Scalar("SELECT operation || ' ' || outcome || ' ' || evidence FROM acquirer_attempts"
                        " WHERE actor = 'reconciler'"),
            "lookup captured approved");
  EXPECT_EQ(db_->Scalar("SELECT payload->>'status' FROM outbox WHERE type = 'payments.charge.captured.v1'"),
            "captured");
}

TEST_F(ReconcilerE2E, TwoRunsStartedTogetherOnAThousandStaleChargesResolveEachExactlyOnce) {
  InsertPending(1000, "stale-");
  // Each captured at the acquirer, as if charge-api had died after every capture (eight clients at once).
  const auto charges = db_->Scalar(
      "SELECT string_agg(idempotency_key || ' ' || amount || ' ' || charge_public_id(id), ',') FROM charges");
  std::vector<std::string> rows;
  for (std::size_t start = 0; start < charges.size();) {
    const auto comma = charges.find(',', start);
    rows.push_back(charges.substr(start, comma == std::string::npos ? std::string::npos : comma - start));
    start = comma == std::string::npos ? charges.size() : comma + 1;
  }
  ASSERT_EQ(rows.size(), 1000u);
  std::vector<std::thread> planters;
  for (std::size_t t = 0; t < 8; ++t) {
    planters.emplace_back([&, t] {
      HttpTestClient client(sim_->port());
      for (std::size_t i = t; i < rows.size(); i += 8) {
        std::istringstream row(rows[i]);
        std::string key, reference;
        std::int64_t amount = 0;
        row >> key >> amount >> reference;
        CaptureWith(client, key, amount, reference);
      }
    });
  }
  for (auto& planter : planters) planter.join();
  const auto env = ReconcilerEnv({{"RECONCILER_BATCH_SIZE", "50"}, {"RECONCILER_CONCURRENCY", "4"}});
  const std::vector<std::string> argv{RECONCILER_BIN};
  ChildProcess a(argv, env);
  ChildProcess b(argv, env);
  const auto ra = a.Wait(60s);
  const auto rb = b.Wait(60s);
  ASSERT_EQ(ra.exit_code, 0) << ra.out << ra.err;
  ASSERT_EQ(rb.exit_code, 0) << rb.out << rb.err;
  const auto sa = SummaryOf(ra.out);
  const auto sb = SummaryOf(rb.out);
  EXPECT_EQ(sa.at("captured").as_int64() + sb.at("captured").as_int64(), 1000);
  EXPECT_EQ(sa.at("examined").as_int64() + sb.at("examined").as_int64(), 1000);
  EXPECT_EQ(sa.at("already_resolved").as_int64() + sb.at("already_resolved").as_int64(), 0);

  EXPECT_EQ(db_->Scalar("SELECT count(*) FROM charges WHERE status = 'captured' AND acquirer_capture_id IS NOT NULL"),
            "1000");
  EXPECT_EQ(db_->Scalar("SELECT count(*) FROM outbox WHERE type = 'payments.charge.captured.v1'"), "1000");
  EXPECT_EQ(db_->Scalar("SELECT count(*) FROM (SELECT aggregateid FROM outbox WHERE type <> "
                        "'payments.charge.initiated.v1' GROUP BY aggregateid HAVING count(*) > 1) d"),
            "0");
  // Each charge was looked up exactly once: no run touched a charge the other had claimed.
  EXPECT_EQ(db_->Scalar("SELECT count(*) || ' ' || count(DISTINCT charge_id) FROM acquirer_attempts"
                        " WHERE actor = 'reconciler'"),
            "1000 1000");
  EXPECT_EQ(Ledger().size(), 1000u);
}

TEST_F(ReconcilerE2E, VisibilityDelayNeverProducesAWrongState) {
  InsertPending(1, "late-");
  SetFaults(R"({"visibility_delay_ms": 3000})");
  CaptureAtAcquirer("late-1");
  const EnvChanges env{{"RECONCILER_VISIBILITY_WINDOW", "5s"}};
  // Early looks do not see the capture yet: the charge stays pending, and that is not an error.
  const auto early = RunReconciler(env);
  EXPECT_EQ(early.process.exit_code, 0) << early.process.out;
  EXPECT_EQ(early.summary.at("still_pending").as_int64(), 1);
  EXPECT_EQ(early.summary.at("failed").as_int64(), 0);
  EXPECT_EQ(Status("late-1"), "pending");
  db_->Execute("UPDATE charges SET next_check_at = now()");  // look again at once, still inside the delay
  EXPECT_EQ(RunReconciler(env).summary.at("still_pending").as_int64(), 1);
  EXPECT_EQ(db_->Scalar("SELECT count(*) FROM acquirer_attempts WHERE actor = 'reconciler' AND outcome = 'not_found'"),
            "2");
  db_->Execute("UPDATE charges SET next_check_at = now()");
  RunUntil([&] { return Status("late-1") != "pending"; }, env);
  EXPECT_EQ(Status("late-1"), "captured");
  EXPECT_EQ(TerminalEvents("late-1"), "payments.charge.captured.v1");
}

// Defect 11: by default, a charge not found on repeated looks is resubmitted with the same key, so the
// acquirer answers (here: it captures the request that never reached it), never `failed` from absence.
TEST_F(ReconcilerE2E, ByDefaultRepeatedNotFoundAsksTheAcquirerInsteadOfFailing) {
  InsertPending(1, "quiet-");
  AnsweredPending("quiet-1");  // its client was told 202: a capture may still happen
  // Its charge-api died after the intent: its client got no answer, never a 202 (issue 41, defect 2).
  InsertPending(1, "unanswered-");
  const EnvChanges defaults{{"RECONCILER_NOT_FOUND_POLICY", std::nullopt}};
  EXPECT_EQ(RunReconciler(defaults).summary.at("still_pending").as_int64(), 2);
  RunUntil([&] { return Status("quiet-1") != "pending" && Status("unanswered-1") != "pending"; }, defaults);
  EXPECT_EQ(Status("quiet-1"), "captured");
  EXPECT_EQ(LedgerEntries("capture", AcquirerKey("quiet-1")), 1u);
  EXPECT_EQ(TerminalEvents("quiet-1"), "payments.charge.captured.v1");
  EXPECT_EQ(Status("unanswered-1"), "needs_review");
  EXPECT_EQ(Field("unanswered-1", "failure_reason"), "not_found_at_acquirer");
  EXPECT_EQ(LedgerEntries("capture", AcquirerKey("unanswered-1")), 0u);
  EXPECT_EQ(db_->Scalar("SELECT count(*) FROM charges WHERE status = 'failed'"), "0");
}

TEST_F(ReconcilerE2E, UnderTheReviewPolicyRepeatedNotFoundGoesToAHuman) {
  InsertPending(1, "shy-");
  const EnvChanges review{{"RECONCILER_NOT_FOUND_POLICY", "review"}};
  RunUntil([&] { return Status("shy-1") != "pending"; }, review);
  EXPECT_EQ(Status("shy-1"), "needs_review");
  EXPECT_EQ(Field("shy-1", "failure_reason"), "not_found_at_acquirer");
  EXPECT_TRUE(Ledger().empty());
}

TEST_F(ReconcilerE2E, UnderTheOptInFailPolicyNotFoundFailsOnlyOnRepeatedLooksPastTheVisibilityWindow) {
  InsertPending(1, "never-");
  const EnvChanges fail{{"RECONCILER_NOT_FOUND_POLICY", "fail"}};
  const auto first = RunReconciler(fail);
  EXPECT_EQ(first.process.exit_code, 0);
  EXPECT_EQ(first.summary.at("still_pending").as_int64(), 1);
  EXPECT_EQ(Status("never-1"), "pending");
  RunUntil([&] { return Status("never-1") != "pending"; }, fail);
  EXPECT_EQ(Status("never-1"), "failed");
  EXPECT_EQ(Field("never-1", "failure_reason"), "not_captured");
  EXPECT_EQ(TerminalEvents("never-1"), "payments.charge.failed.v1");
  EXPECT_TRUE(Ledger().empty());
  // At least two not-found looks, the last one a visibility window after the first.
  EXPECT_EQ(db_->Scalar("SELECT count(*) >= 2 AND max(started_at) - min(started_at) >= interval '1 second'"
                        " FROM acquirer_attempts WHERE actor = 'reconciler' AND outcome = 'not_found'"),
            "t");
}

TEST_F(ReconcilerE2E, ResubmitPolicyCapturesWithTheSameKeyAndReplaysADecline) {
  InsertPending(1, "lost-");                                      // the capture never reached the acquirer
  InsertPending(1, "refused-", "1 minute", "pm_tok_declined");    // the acquirer declined it; lookups cannot show that
  CaptureAtAcquirer("refused-1", std::nullopt, std::nullopt, "pm_tok_declined");
  AnsweredPending("lost-1");  // both clients were told 202
  AnsweredPending("refused-1");
  ASSERT_TRUE(Ledger().empty());
  const EnvChanges env{{"RECONCILER_NOT_FOUND_POLICY", "resubmit"}};
  RunUntil([&] { return Status("lost-1") != "pending" && Status("refused-1") != "pending"; }, env);
  EXPECT_EQ(Status("lost-1"), "captured");
  EXPECT_EQ(LedgerEntries("capture", AcquirerKey("lost-1")), 1u);
  EXPECT_EQ(TerminalEvents("lost-1"), "payments.charge.captured.v1");
  EXPECT_EQ(Status("refused-1"), "failed");
  EXPECT_EQ(Field("refused-1", "decline_code"), "card_declined");
  EXPECT_EQ(TerminalEvents("refused-1"), "payments.charge.failed.v1");
  EXPECT_EQ(Ledger().size(), 1u);
  EXPECT_EQ(db_->Scalar("SELECT count(*) FROM acquirer_attempts WHERE actor = 'reconciler' AND operation = 'capture'"),
            "2");
}

TEST_F(ReconcilerE2E, DifferentAmountAtTheAcquirerEndsNeedsReviewAndFixesNothing) {
  InsertPending(1, "odd-");
  CaptureAtAcquirer("odd-1", 99999);
  const auto run = RunReconciler();
  EXPECT_EQ(run.process.exit_code, 0) << run.process.out;
  EXPECT_EQ(run.summary.at("needs_review").as_int64(), 1);
  EXPECT_EQ(Status("odd-1"), "needs_review");
  EXPECT_EQ(Field("odd-1", "failure_reason"), "acquirer_capture_mismatch");
  EXPECT_EQ(TerminalEvents("odd-1"), "payments.charge.needs_review.v1");
  EXPECT_EQ(Ledger().size(), 1u);  // no void, no second capture
}

TEST_F(ReconcilerE2E, UnknownStaysPendingWithBackoffAndTheRunExitsNonZero) {
  InsertPending(1, "flaky-");
  CaptureAtAcquirer("flaky-1");
  SetFaults(R"({"error_rate": 1.0, "retry_after_s": 0, "apply_to": ["lookup"]})");
  const auto run = RunReconciler({{"RECONCILER_BACKOFF_BASE", "20s"}, {"RECONCILER_BACKOFF_MAX", "1m"}});
  EXPECT_EQ(run.process.exit_code, 1);
  EXPECT_EQ(run.summary.at("errors").as_int64(), 1);
  EXPECT_EQ(run.summary.at("still_pending").as_int64(), 1);
  EXPECT_EQ(Status("flaky-1"), "pending");
  EXPECT_EQ(Field("flaky-1", "check_count || ' ' || (owner_id IS NULL) || ' ' || "
                             "(next_check_at BETWEEN now() + interval '9 seconds' AND now() + interval '20 seconds')"),
            "1 true true");
  EXPECT_EQ(db_->Scalar("SELECT string_agg(outcome || '/' || evidence, ',') FROM acquirer_attempts"
                        " WHERE actor = 'reconciler'"),
            "unavailable/unknown,unavailable/unknown");
  // Not due yet: the next run leaves it alone.
  SetFaults("{}");
  EXPECT_EQ(RunReconciler().summary.at("examined").as_int64(), 0);
  db_->Execute("UPDATE charges SET next_check_at = now()");
  EXPECT_EQ(RunReconciler().summary.at("captured").as_int64(), 1);
  EXPECT_EQ(TerminalEvents("flaky-1"), "payments.charge.captured.v1");
}

TEST_F(ReconcilerE2E, PastTheDeadlineACaptureIsVoidedWithTheSameKeyAndTheChargeCanceled) {
  InsertPending(1, "old-", "2 hours");
  const auto capture = CaptureAtAcquirer("old-1");
  const auto run = RunReconciler();
  EXPECT_EQ(run.process.exit_code, 0) << run.process.out;
  EXPECT_EQ(run.summary.at("canceled").as_int64(), 1);
  EXPECT_EQ(Status("old-1"), "canceled");
  EXPECT_EQ(Field("old-1", "acquirer_capture_id"), std::string(capture.at("id").as_string()));
  EXPECT_EQ(TerminalEvents("old-1"), "payments.charge.canceled.v1");
  EXPECT_EQ(LedgerEntries("void", AcquirerKey("old-1")), 1u);
  EXPECT_EQ(db_->Scalar("SELECT string_agg(operation || '/' || outcome, ',' ORDER BY attempt_no) FROM acquirer_attempts"
                        " WHERE actor = 'reconciler'"),
            "lookup/captured,void/voided");
}

TEST_F(ReconcilerE2E, PastTheDeadlineWithoutConfirmationNeedsReview) {
  InsertPending(1, "unknown-", "2 hours");
  const auto run = RunReconciler();
  // Not found, a single look, past the deadline: nobody can confirm anything any more.
  EXPECT_EQ(Status("unknown-1"), "needs_review");
  EXPECT_EQ(Field("unknown-1", "failure_reason"), "deadline_passed_unconfirmed");
  EXPECT_EQ(TerminalEvents("unknown-1"), "payments.charge.needs_review.v1");
  EXPECT_EQ(run.summary.at("needs_review").as_int64(), 1);
}

// Issue 42: a void the acquirer did not answer is the acquirer's weather, not a person's decision. The
// charge stays pending with its void on record (so no capture of it lands), and a later run voids it
// again with the same key and cancels it.
TEST_F(ReconcilerE2E, AVoidThatFailedTransientlyIsVoidedAgainByALaterRunAndEndsCanceledNotInReview) {
  InsertPending(1, "unvoidable-", "2 hours");
  CaptureAtAcquirer("unvoidable-1");
  SetFaults(R"({"error_rate": 1.0, "retry_after_s": 0, "apply_to": ["void"]})");
  const auto failed = RunReconciler();
  EXPECT_EQ(failed.process.exit_code, 1) << "a run whose void got no answer says so";
  EXPECT_EQ(Status("unvoidable-1"), "pending");
  EXPECT_EQ(failed.summary.at("needs_review").as_int64(), 0);
  EXPECT_EQ(failed.summary.at("still_pending").as_int64(), 1);
  EXPECT_EQ(TerminalEvents("unvoidable-1"), "");
  EXPECT_EQ(LedgerEntries("void", AcquirerKey("unvoidable-1")), 0u);

  SetFaults("{}");
  db_->Execute("UPDATE charges SET next_check_at = now()");
  const auto later = RunReconciler();
  EXPECT_EQ(later.process.exit_code, 0) << later.process.out;
  EXPECT_EQ(Status("unvoidable-1"), "canceled");
  EXPECT_EQ(TerminalEvents("unvoidable-1"), "payments.charge.canceled.v1");
  EXPECT_EQ(LedgerEntries("void", AcquirerKey("unvoidable-1")), 1u);
  // Every attempt of the first run refused with 503, then one void with the same key that the acquirer did.
  EXPECT_THAT(db_->Scalar("SELECT string_agg(operation || '/' || outcome, ',' ORDER BY attempt_no) FROM "
                          "acquirer_attempts WHERE actor = 'reconciler' AND operation = 'void'"),
              ::testing::MatchesRegex("(void/unavailable,)+void/voided"));
}

TEST_F(ReconcilerE2E, CrashAtItsFailpointLosesNothingAndTheNextRunResolvesOnce) {
  InsertPending(1, "fp-");
  CaptureAtAcquirer("fp-1");
  const auto crashed = RunReconciler({{"FAILPOINTS", "reconciler.after_acquirer_lookup=crash"}});
  EXPECT_EQ(crashed.process.term_signal, SIGKILL) << crashed.process.out;
  EXPECT_EQ(Status("fp-1"), "pending");
  EXPECT_THAT(Field("fp-1", "owner_id"), HasSubstr("reconciler/"));  // its claim outlives it, until the lease ends
  EXPECT_EQ(db_->Scalar("SELECT count(*) FROM acquirer_attempts WHERE actor = 'reconciler' AND finished_at IS NULL"),
            "1");
  const auto failing = RunReconciler({{"FAILPOINTS", "reconciler.after_acquirer_lookup=error"}});
  EXPECT_EQ(failing.summary.at("examined").as_int64(), 0);  // the dead run's lease still holds
  RunUntil([&] { return Status("fp-1") == "captured"; });
  EXPECT_EQ(TerminalEvents("fp-1"), "payments.charge.captured.v1");
  EXPECT_EQ(LedgerEntries("capture", AcquirerKey("fp-1")), 1u);

  InsertPending(1, "fp-err-");
  CaptureAtAcquirer("fp-err-1");
  const auto erred = RunReconciler({{"FAILPOINTS", "reconciler.after_acquirer_lookup=error"}});
  EXPECT_EQ(erred.process.exit_code, 1);
  EXPECT_EQ(erred.summary.at("errors").as_int64(), 1);
  EXPECT_EQ(Status("fp-err-1"), "pending");
  EXPECT_EQ(Field("fp-err-1", "owner_id"), "");  // given back at the end of the run
}

TEST_F(ReconcilerE2E, TimeBudgetStopsStartingChargesAndGivesTheRestBack) {
  InsertPending(5, "budget-");
  for (int i = 1; i <= 5; ++i) CaptureAtAcquirer("budget-" + std::to_string(i));
  // One charge at a time, each stalled 1 s after its lookup: charges start at about 0 s and 1 s; at 2 s the
  // 1.5 s budget is spent.
  const auto run = RunReconciler({{"FAILPOINTS", "reconciler.after_acquirer_lookup=sleep(1000)"},
                                  {"RECONCILER_CONCURRENCY", "1"},
                                  {"RECONCILER_TIME_BUDGET", "1500ms"}});
  EXPECT_EQ(run.process.exit_code, 0) << run.process.out;
  EXPECT_EQ(run.summary.at("examined").as_int64(), 2);
  EXPECT_EQ(run.summary.at("captured").as_int64(), 2);
  EXPECT_EQ(db_->Scalar("SELECT string_agg(idempotency_key || ':' || status, ',' ORDER BY created_at) FROM charges"),
            "budget-1:captured,budget-2:captured,budget-3:pending,budget-4:pending,budget-5:pending");
  EXPECT_EQ(db_->Scalar("SELECT count(*) FROM charges WHERE owner_id IS NOT NULL"), "0");  // given back at once
  EXPECT_EQ(RunReconciler().summary.at("captured").as_int64(), 3);
}

TEST_F(ReconcilerE2E, ABudgetSpentBeforeTheFirstChargeEndsTheRunAndGivesEverythingBack) {
  InsertPending(50, "spent-");
  // 1 ms: spent while the first batch is being claimed (or, on a fast machine, just after a charge or two).
  const auto run = RunReconciler({{"RECONCILER_TIME_BUDGET", "1ms"}, {"RECONCILER_CONCURRENCY", "4"}});
  EXPECT_EQ(run.process.exit_code, 0) << run.process.out;
  EXPECT_LT(run.summary.at("examined").as_int64(), 50);
  EXPECT_EQ(db_->Scalar("SELECT count(*) FROM charges WHERE owner_id IS NOT NULL"), "0");
}

TEST_F(ReconcilerE2E, SigtermFinishesTheChargeInProgressAndGivesTheRestBack) {
  InsertPending(5, "term-");
  for (int i = 1; i <= 5; ++i) CaptureAtAcquirer("term-" + std::to_string(i));
  ChildProcess reconciler({RECONCILER_BIN},
                          ReconcilerEnv({{"FAILPOINTS", "reconciler.after_acquirer_lookup=sleep(1500)"},
                                         {"RECONCILER_CONCURRENCY", "1"}}));
  ASSERT_TRUE(Eventually([&] {
    return db_->Scalar("SELECT count(*) FROM acquirer_attempts WHERE actor = 'reconciler'") == "1";
  }));
  reconciler.Signal(SIGTERM);
  const auto result = reconciler.Wait(20s);
  EXPECT_EQ(result.exit_code, 0) << result.out;
  const auto summary = SummaryOf(result.out);
  EXPECT_EQ(summary.at("examined").as_int64(), 1);
  EXPECT_EQ(summary.at("captured").as_int64(), 1);
  EXPECT_EQ(db_->Scalar("SELECT count(*) FROM charges WHERE status = 'pending' AND owner_id IS NULL"), "4");
}

TEST_F(ReconcilerE2E, ChargeApiTakeoverWhileTheReconcilerStallsExactlyOneWins) {
  auto api = StartChargeApi({{"FAILPOINTS", "charge.after_acquirer_response=crash"}});
  {
    HttpTestClient client(api->port(), "127.0.0.1", 30s);
    EXPECT_FALSE(client.Post("/v1/charges", ChargeBody(), ChargeHeaders("race-1")).ok());
  }
  api->process().Wait(10s);
  api = StartChargeApi();
  // The charge-api lease (3 s) must lapse before the reconciler may claim it.
  ASSERT_TRUE(Eventually([&] { return Field("race-1", "lease_expires_at < now()") == "t"; }, 10s));

  // The reconciler claims it (lease 2 s), looks it up, then stalls 4 s at its failpoint: its lease runs out
  // and the client's retry takes the charge over and resolves it first.
  const EnvChanges stall{{"FAILPOINTS", "reconciler.after_acquirer_lookup=sleep(4000)"},
                         {"RECONCILER_GRACE_PERIOD", "0s"},
                         {"RECONCILER_CLAIM_LEASE", "2s"},
                         {"ACQUIRER_REQUEST_TIMEOUT", "500ms"},
                         {"ACQUIRER_RETRY_BACKOFF_BUDGET", "500ms"}};
  ChildProcess reconciler({RECONCILER_BIN}, ReconcilerEnv(stall));
  ASSERT_TRUE(Eventually([&] {
    return db_->Scalar("SELECT count(*) FROM acquirer_attempts WHERE actor = 'reconciler'") == "1";
  }));
  HttpResult answer;
  ASSERT_TRUE(Eventually(
      [&] {
        HttpTestClient client(api->port(), "127.0.0.1", 30s);
        answer = client.Post("/v1/charges", ChargeBody(), ChargeHeaders("race-1"));
        return answer.ok() && answer.status() != 409u;
      },
      15s));
  EXPECT_EQ(answer.status(), 201u) << answer.response.body();
  const auto result = reconciler.Wait(30s);
  const auto summary = SummaryOf(result.out);
  EXPECT_EQ(summary.at("already_resolved").as_int64(), 1) << result.out;
  EXPECT_EQ(summary.at("captured").as_int64(), 0);
  EXPECT_EQ(Status("race-1"), "captured");
  EXPECT_EQ(TerminalEvents("race-1"), "payments.charge.captured.v1");
  EXPECT_EQ(LedgerEntries("capture", AcquirerKey("race-1")), 1u);
}

// Issue 41, defect 3: two runs at once (an operator's manual Job beside the schedule). Run A reads
// "captured" just before the deadline and stalls, past its claim and past the deadline; run B claims the
// charge, voids that capture and dies before recording `canceled`. A's stale capture must not land over
// the void, and the charge, still pending, is looked at again and ends canceled. Before the fix A recorded
// `captured` (a replay then answered 201 for money the acquirer had given back), and with B's write lost
// nothing ever looked at the charge again.
TEST_F(ReconcilerE2E, AStalledRunsStaleCaptureNeverLandsOverAnotherRunsVoid) {
  InsertPending(1, "stale-", "57 seconds");
  CaptureAtAcquirer("stale-1");
  const EnvChanges common{{"RECONCILER_GRACE_PERIOD", "0s"}, {"RECONCILER_DEADLINE", "60s"}};
  auto with = [&](std::string failpoints) {
    auto env = common;
    env["FAILPOINTS"] = std::move(failpoints);
    return ReconcilerEnv(env);
  };
  ChildProcess stalled({RECONCILER_BIN}, with("reconciler.before_transition=sleep(9000)"));
  // Its lookup is on record (its finish is written with the transition, after the stall).
  ASSERT_TRUE(Eventually([&] {
    return db_->Scalar("SELECT count(*) FROM acquirer_attempts WHERE actor = 'reconciler'") == "1";
  }));
  // A's claim (4 s) lapses while it sleeps; by then the charge is past its deadline too.
  ASSERT_TRUE(Eventually(
      [&] {
        return Field("stale-1", "lease_expires_at < now() AND created_at < now() - interval '60 seconds'") == "t";
      },
      10s))
      << Field("stale-1", "status || ' ' || coalesce(owner_id, '-') || ' ' || coalesce(lease_expires_at::text, '-') || "
                          "' ' || (now() - created_at)::text");
  const auto voider = RunProcess({RECONCILER_BIN}, with("reconciler.before_transition=crash"), 30s);
  EXPECT_EQ(voider.term_signal, SIGKILL) << voider.out << voider.err;
  ASSERT_EQ(LedgerEntries("void", AcquirerKey("stale-1")), 1u);
  ASSERT_EQ(Status("stale-1"), "pending");  // the voiding run's `canceled` was lost with it

  const auto stale = stalled.Wait(30s);
  EXPECT_EQ(SummaryOf(stale.out).at("captured").as_int64(), 0) << stale.out;
  EXPECT_EQ(Status("stale-1"), "pending");
  RunUntil([&] { return Status("stale-1") != "pending"; }, common);
  EXPECT_EQ(Status("stale-1"), "canceled");
  EXPECT_EQ(Field("stale-1", "failure_reason"), "deadline_passed_voided");
  EXPECT_EQ(TerminalEvents("stale-1"), "payments.charge.canceled.v1");
  EXPECT_EQ(LedgerEntries("capture", AcquirerKey("stale-1")), 1u);
}

TEST_F(ReconcilerE2E, ClaimedChargeIsInFlightForAChargeApiRetryUntilTheReconcilerResolvesIt) {
  auto api = StartChargeApi({{"FAILPOINTS", "charge.after_acquirer_response=crash"}});
  {
    HttpTestClient client(api->port(), "127.0.0.1", 30s);
    EXPECT_FALSE(client.Post("/v1/charges", ChargeBody(), ChargeHeaders("race-2")).ok());
  }
  api->process().Wait(10s);
  api = StartChargeApi();
  ASSERT_TRUE(Eventually([&] { return Field("race-2", "lease_expires_at < now()") == "t"; }, 10s));
  ChildProcess reconciler({RECONCILER_BIN},
                          ReconcilerEnv({{"FAILPOINTS", "reconciler.after_acquirer_lookup=sleep(1500)"},
                                         {"RECONCILER_GRACE_PERIOD", "0s"}}));
  ASSERT_TRUE(Eventually([&] {
    return db_->Scalar("SELECT count(*) FROM acquirer_attempts WHERE actor = 'reconciler'") == "1";
  }));
  HttpTestClient client(api->port(), "127.0.0.1", 30s);
  const auto during = client.Post("/v1/charges", ChargeBody(), ChargeHeaders("race-2"));
  EXPECT_EQ(during.status(), 409u) << during.response.body();  // the reconciler's claim is a live owner
  EXPECT_EQ(SummaryOf(reconciler.Wait(30s).out).at("captured").as_int64(), 1);
  const auto after = client.Post("/v1/charges", ChargeBody(), ChargeHeaders("race-2"));
  EXPECT_EQ(after.status(), 201u) << after.response.body();
  EXPECT_EQ(after.json().at("status").as_string(), "captured");
  EXPECT_EQ(TerminalEvents("race-2"), "payments.charge.captured.v1");
  EXPECT_EQ(LedgerEntries("capture", AcquirerKey("race-2")), 1u);
}

TEST_F(ReconcilerE2E, WindowReportFindsEachPlantedDiscrepancyAndNothingElse) {
  // Captured before the window: a charge whose capture lies outside it.
  InsertPending(1, "early-");
  const auto early_capture = CaptureAtAcquirer("early-1");
  std::this_thread::sleep_for(20ms);
  const auto from = std::chrono::system_clock::now();

  InsertPending(6, "w-");
  const auto ok = CaptureAtAcquirer("w-1");                      // agrees
  const auto odd = CaptureAtAcquirer("w-2", 1);                  // another amount
  CaptureAtAcquirer("w-4");                                      // our charge says failed
  CaptureAtAcquirer("w-5");                                      // ours is still pending: the sweep's job
  CaptureAtAcquirer("ghost", 500, "ch_" + std::string(32, 'a'));  // nothing of ours
  // w-3: captured on our side, nothing at the acquirer. w-6: pending, nothing anywhere.
  db_->Execute("UPDATE charges SET status = 'captured', updated_at = now(), acquirer_capture_id = CASE idempotency_key"
               " WHEN 'w-1' THEN '" + std::string(ok.at("id").as_string()) + "' WHEN 'w-2' THEN '" +
               std::string(odd.at("id").as_string()) + "' WHEN 'early-1' THEN '" +
               std::string(early_capture.at("id").as_string()) + "' END"
               " WHERE idempotency_key IN ('w-1', 'w-2', 'w-3', 'early-1')");
  db_->Execute("UPDATE charges SET status = 'failed', failure_reason = 'not_captured' WHERE idempotency_key = 'w-4'");
  // The trace of each charge's request, which the run's lines about the charge carry (issue 14, defect 6).
  const auto trace_of = [](const std::string& key) { return std::string(30, 'c') + key.substr(2) + "0"; };
  for (const auto* key : {"w-2", "w-3", "w-4"}) {
    db_->Execute("UPDATE charges SET traceparent = '00-" + trace_of(key) + "-00f067aa0ba902b7-01'"
                 " WHERE idempotency_key = '" + key + "'");
  }
  std::this_thread::sleep_for(5ms);
  const auto to = std::chrono::system_clock::now();
  const auto rfc = [](auto t) { return util::FormatRfc3339(t); };
  const auto output = (dir_ / "report.json").string();
  // One line per discrepancy, and the summary's count of each kind says the same.
  const auto discrepancies_of = [](const WindowReport& report) {
    std::vector<std::string> found;
    std::map<std::string, std::int64_t> kinds;
    for (const auto& o : report.discrepancies) {
      std::string entry(o.at("kind").as_string());
      ++kinds[entry];
      if (o.contains("fields")) {
        for (const auto& f : o.at("fields").as_array()) entry += ":" + std::string(f.as_string());
      }
      entry += o.contains("charge_id") ? " " + std::string(o.at("charge_id").as_string())
                                       : " " + std::string(o.at("reference").as_string());
      found.push_back(entry);
    }
    std::map<std::string, std::int64_t> counted;
    for (const auto& [kind, n] : report.summary.at("discrepancies").as_object()) counted[kind] = n.as_int64();
    EXPECT_EQ(kinds, counted) << json::serialize(report.summary);
    return found;
  };

  // Issue 41, defect 7: while the window has not settled (it closed less than the visibility window, 1 s
  // here, ago) the report compares and tells, and flags nothing; and w-3, recorded captured a moment ago,
  // is not yet taken for a capture missing at the acquirer. Before the fix this run flagged all three.
  const auto early = RunReconciler({}, {"window", "--from", rfc(from - 1ms), "--to", rfc(to + 1ms)});
  ASSERT_EQ(early.process.exit_code, 0) << early.process.out << early.process.err;
  const auto unsettled = ParseWindowReport(early.process.out);
  EXPECT_FALSE(unsettled.summary.at("settled").as_bool());
  EXPECT_THAT(discrepancies_of(unsettled), UnorderedElementsAre("mismatch:amount " + PublicId("w-2"),
                                                                "mismatch:status " + PublicId("w-4"),
                                                                "capture_without_local_record ch_" +
                                                                    std::string(32, 'a')));
  EXPECT_EQ(unsettled.summary.at("flagged").as_int64(), 0);
  EXPECT_EQ(unsettled.summary.at("orphans_recorded").as_int64(), 0);
  EXPECT_EQ(db_->Scalar("SELECT count(*) FROM charges WHERE status = 'needs_review'"), "0");

  std::this_thread::sleep_until(to + 1ms + 1100ms);
  const auto run = RunReconciler({{"ACQUIRER_LIST_PAGE_LIMIT", "2"}},
                                 {"window", "--from", rfc(from - 1ms), "--to", rfc(to + 1ms), "--output", output});
  ASSERT_EQ(run.process.exit_code, 0) << run.process.out << run.process.err;
  std::ifstream file(output);
  const std::string text((std::istreambuf_iterator<char>(file)), std::istreambuf_iterator<char>());
  const auto parsed = ParseWindowReport(text);
  const auto& report = parsed.summary;
  EXPECT_TRUE(report.at("complete").as_bool());
  EXPECT_TRUE(report.at("settled").as_bool());
  EXPECT_EQ(report.at("acquirer").at("captures").as_int64(), 5);
  EXPECT_EQ(report.at("acquirer").at("pages").as_int64(), 3);
  const auto found = discrepancies_of(parsed);
  EXPECT_THAT(found, UnorderedElementsAre("mismatch:amount " + PublicId("w-2"), "mismatch:status " + PublicId("w-4"),
                                          "capture_without_local_record ch_" + std::string(32, 'a'),
                                          "missing_at_acquirer " + PublicId("w-3")));
  EXPECT_EQ(parsed.lines, 5u) << "one line per discrepancy, then the summary";
  EXPECT_EQ(report.at("matched").as_int64(), 1);
  EXPECT_EQ(report.at("pending_with_capture").as_int64(), 1);
  EXPECT_EQ(report.at("confirmed_outside_window").as_int64(), 1);
  EXPECT_EQ(report.at("flagged").as_int64(), 3);
  EXPECT_EQ(report.at("orphans_recorded").as_int64(), 1);
  EXPECT_EQ(report.at("unverified").as_int64(), 0);
  EXPECT_EQ(db_->Scalar("SELECT count(*) FROM orphan_captures WHERE status = 'open'"), "1");

  // Flagged charges are needs_review with their event; nothing else changed.
  for (const auto* key : {"w-2", "w-3", "w-4"}) {
    EXPECT_EQ(Status(key), "needs_review") << key;
    EXPECT_EQ(TerminalEvents(key), "payments.charge.needs_review.v1") << key;
  }
  // The lines about the flagged charges carry the trace id of each one's own request.
  for (const auto* key : {"w-3", "w-4"}) {
    int lines = 0;
    std::istringstream log(run.process.out + run.process.err);
    for (std::string line; std::getline(log, line);) {
      if (line.empty() || line.front() != '{' || line.find(PublicId(key)) == std::string::npos) continue;
      const auto entry = json::parse(line).as_object();
      ++lines;
      const auto* trace = entry.if_contains("trace_id");
      EXPECT_TRUE(trace != nullptr && trace->as_string() == trace_of(key)) << line;
    }
    EXPECT_GE(lines, 1) << key << ": no line about it\n" << run.process.out << run.process.err;
  }
  EXPECT_EQ(Field("w-2", "failure_reason"), "window_mismatch");
  EXPECT_EQ(Status("w-1"), "captured");
  EXPECT_EQ(Status("early-1"), "captured");
  EXPECT_EQ(Status("w-5"), "pending");
  EXPECT_EQ(Status("w-6"), "pending");
  EXPECT_EQ(TerminalEvents("w-1"), "");
  EXPECT_EQ(Ledger().size(), 6u);
  EXPECT_EQ(run.summary.at("mode").as_string(), "window");
  EXPECT_EQ(run.summary.at("needs_review").as_int64(), 3);
  EXPECT_EQ(run.summary.at("discrepancies").at("mismatch").as_int64(), 2);

  // Again, with the report on stdout: stdout holds exactly the report; logs and summary go to stderr. The
  // flagged charges are in review now: w-2's amount still differs (reported, not flagged twice), w-4's
  // status no longer contradicts the capture, and w-3 is no longer a captured charge of ours.
  const auto again = RunReconciler({}, {"window", "--from", rfc(from - 1ms), "--to", rfc(to + 1ms)});
  ASSERT_EQ(again.process.exit_code, 0) << again.process.err;
  const auto on_stdout = ParseWindowReport(again.process.out);
  EXPECT_EQ(on_stdout.summary.at("flagged").as_int64(), 0);
  EXPECT_EQ(on_stdout.discrepancies.size(), 2u);
  EXPECT_THAT(again.process.err, HasSubstr("\"msg\":\"run summary\""));
  EXPECT_EQ(db_->Scalar("SELECT count(*) FROM outbox WHERE type = 'payments.charge.needs_review.v1'"), "3");
}

TEST_F(ReconcilerE2E, WindowReportWithAnUnreadableListingFlagsNothingAndFails) {
  InsertPending(1, "lw-");
  db_->Execute("UPDATE charges SET status = 'captured', updated_at = now()");
  SetFaults(R"({"error_rate": 1.0, "retry_after_s": 0, "apply_to": ["list"]})");
  const auto now = std::chrono::system_clock::now();
  const auto run = RunReconciler({}, {"window", "--from", util::FormatRfc3339(now - 1h), "--to",
                                      util::FormatRfc3339(now + 1min), "--output", (dir_ / "r.json").string()});
  EXPECT_EQ(run.process.exit_code, 1);
  std::ifstream file(dir_ / "r.json");
  const auto report = ParseWindowReport(std::string((std::istreambuf_iterator<char>(file)), {})).summary;
  EXPECT_FALSE(report.at("complete").as_bool());
  EXPECT_EQ(report.at("listing_end").as_string(), "page_failed");
  EXPECT_EQ(report.at("flagged").as_int64(), 0);
  EXPECT_EQ(Status("lw-1"), "captured");
}

// reconciler.window.max_captures bounds what a report holds: a window with more captures than that, on
// the acquirer's side or ours, is incomplete and flags nothing (a partial comparison proves nothing), the
// log names the key to raise, and the run fails like an unreadable listing. The lines already written
// stand: the first page's discrepancy was reported when its page was read, before the cap was known.
TEST_F(ReconcilerE2E, WindowReportOverMaxCapturesIsIncompleteAndFlagsNothing) {
  InsertPending(4, "cap-");
  const auto from = std::chrono::system_clock::now();
  CaptureAtAcquirer("cap-1", 1);                                // another amount: a mismatch, on page 1
  CaptureAtAcquirer("cap-2");                                   // agrees
  CaptureAtAcquirer("ghost", 500, "ch_" + std::string(32, 'd'));  // nothing of ours, on page 2
  // cap-3 and cap-4: captured on our side, nothing at the acquirer.
  db_->Execute("UPDATE charges SET status = 'captured', updated_at = now() WHERE idempotency_key LIKE 'cap-%'");
  std::this_thread::sleep_for(5ms);
  const auto to = std::chrono::system_clock::now() + 1ms;
  std::this_thread::sleep_until(to + 1100ms);  // settled (visibility window 1 s)
  const auto rfc = [](auto t) { return util::FormatRfc3339(t); };
  const std::vector<std::string> args{"window", "--from", rfc(from - 1ms), "--to", rfc(to)};
  const auto untouched = [&] {
    EXPECT_EQ(db_->Scalar("SELECT count(*) FROM charges WHERE status = 'needs_review'"), "0");
    EXPECT_EQ(db_->Scalar("SELECT count(*) FROM orphan_captures"), "0");
  };

  // The acquirer's side: 3 captures, 2 a page, a cap of 2.
  auto over = RunReconciler({{"ACQUIRER_LIST_PAGE_LIMIT", "2"}, {"RECONCILER_WINDOW_MAX_CAPTURES", "2"}}, args);
  EXPECT_EQ(over.process.exit_code, 1) << over.process.out << over.process.err;
  auto report = ParseWindowReport(over.process.out);
  EXPECT_FALSE(report.summary.at("complete").as_bool());
  EXPECT_EQ(report.summary.at("listing_end").as_string(), "max_captures_exceeded");
  EXPECT_EQ(report.summary.at("max_captures").as_int64(), 2);
  EXPECT_EQ(report.summary.at("flagged").as_int64(), 0);
  EXPECT_EQ(report.summary.at("orphans_recorded").as_int64(), 0);
  EXPECT_EQ(report.summary.at("level").as_string(), "error");
  ASSERT_EQ(report.discrepancies.size(), 1u) << over.process.out;
  EXPECT_EQ(report.discrepancies[0].at("charge_id").as_string(), PublicId("cap-1"));
  EXPECT_THAT(over.process.err, HasSubstr("reconciler.window.max_captures (2)"));
  EXPECT_THAT(over.process.err, HasSubstr("--from/--to"));
  EXPECT_EQ(over.summary.at("errors").as_int64(), 1);
  untouched();

  // Our side: 4 captured charges of ours in the window, a cap of 3 for a listing of 3 captures.
  over = RunReconciler({{"RECONCILER_WINDOW_MAX_CAPTURES", "3"}}, args);
  EXPECT_EQ(over.process.exit_code, 1) << over.process.out << over.process.err;
  report = ParseWindowReport(over.process.out);
  EXPECT_EQ(report.summary.at("listing_end").as_string(), "max_captures_exceeded");
  EXPECT_EQ(report.summary.at("local").at("captured_in_window").as_int64(), 4);
  EXPECT_THAT(over.process.err, HasSubstr("captured charges of ours"));
  untouched();

  // Within the cap the same window is judged: what the cap held back was the only reason.
  const auto within = RunReconciler({{"ACQUIRER_LIST_PAGE_LIMIT", "2"}, {"RECONCILER_WINDOW_MAX_CAPTURES", "4"}}, args);
  EXPECT_EQ(within.process.exit_code, 0) << within.process.out << within.process.err;
  report = ParseWindowReport(within.process.out);
  EXPECT_TRUE(report.summary.at("complete").as_bool());
  EXPECT_EQ(report.summary.at("orphans_recorded").as_int64(), 1);
  EXPECT_EQ(report.summary.at("flagged").as_int64(), 3);  // cap-1's amount; cap-3, cap-4 missing at the acquirer
  EXPECT_EQ(Status("cap-1"), "needs_review");
}

TEST_F(ReconcilerE2E, WindowReportWithLastReportsTheLatestSettledWholePeriod) {
  // The hour that ended at least the visibility window (1 s here) before the run: the hours start at the
  // epoch, so the text is known from the clock alone. A run across an hour's end may name either one.
  const auto hour_before = [](std::chrono::system_clock::time_point t) {
    constexpr std::int64_t kHourMicros = 3'600'000'000;
    const auto start = util::FromUnixMicros(util::ToUnixMicros(t - std::chrono::seconds{1}) / kHourMicros * kHourMicros);
    return util::FormatRfc3339(start - std::chrono::hours{1}) + " " + util::FormatRfc3339(start);
  };
  const auto before = hour_before(std::chrono::system_clock::now());
  const auto output = (dir_ / "last.json").string();
  const auto run = RunReconciler({}, {"window", "--last", "1h", "--output", output});
  const auto after = hour_before(std::chrono::system_clock::now());
  ASSERT_EQ(run.process.exit_code, 0) << run.process.err;
  std::ifstream file(output);
  const auto report = ParseWindowReport(std::string((std::istreambuf_iterator<char>(file)), {})).summary;
  const auto window = std::string(report.at("window").at("from").as_string()) + " " +
                      std::string(report.at("window").at("to").as_string());
  EXPECT_THAT(window, ::testing::AnyOf(before, after));
  EXPECT_TRUE(report.at("settled").as_bool());
}

// A Pushgateway stand-in: records each request.
class FakePushgateway {
 public:
  FakePushgateway()
      : server_({}, [this](http::Request request) -> asio::awaitable<http::Reply> {
          {
            std::lock_guard lock(mutex_);
            requests_.push_back(std::string(request.method_string()) + " " + std::string(request.target()) + "\n" +
                                request.body());
          }
          http::Response response{boost::beast::http::status::ok, 11};
          co_return http::Reply{std::move(response)};
        }) {
    port_ = server_.Start();
  }
  std::uint16_t port() const { return port_; }
  std::vector<std::string> requests() {
    std::lock_guard lock(mutex_);
    return requests_;
  }

 private:
  http::Server server_;
  std::uint16_t port_ = 0;
  std::mutex mutex_;
  std::vector<std::string> requests_;
};

TEST_F(ReconcilerE2E, MetricsArePushedToThePushgatewayAndAnUnreachableGatewayFailsTheRun) {
  InsertPending(1, "m-");
  CaptureAtAcquirer("m-1");
  FakePushgateway gateway;
  const auto run = RunReconciler({{"METRICS_PUSHGATEWAY_URL", "http://127.0.0.1:" + std::to_string(gateway.port())}});
  EXPECT_EQ(run.process.exit_code, 0) << run.process.out;
  const auto requests = gateway.requests();
  ASSERT_EQ(requests.size(), 1u);
  EXPECT_THAT(requests[0], HasSubstr("POST /metrics/job/reconciler/mode/sweep\n"));
  EXPECT_THAT(requests[0], HasSubstr("reconciler_last_run_resolved_charges{outcome=\"captured\"} 1"));
  EXPECT_THAT(requests[0], HasSubstr("reconciler_last_run_examined_charges 1"));
  EXPECT_THAT(requests[0], HasSubstr("reconciler_last_run_errors 0"));
  EXPECT_THAT(requests[0], HasSubstr("reconciler_last_success_timestamp_seconds "));

  const auto unreachable = RunReconciler({{"METRICS_PUSHGATEWAY_URL", "http://127.0.0.1:1"}});
  EXPECT_EQ(unreachable.process.exit_code, 1);
  EXPECT_THAT(unreachable.process.out, HasSubstr("pushing metrics to http://127.0.0.1:1 failed"));
}

}  // namespace
}  // namespace charge_outbox::testing
