// Money safety under combined faults: charge-api, the reconciler and acquirer-sim as separate processes
// against a real PostgreSQL, each scenario two faults at once (a crash, then an outage; a crash, then a
// void; a stall, then another actor). Each test names the defect of issue 11 it pins; every one of them
// failed before the fix.
//
// The acquirer-sim listens on a fixed port below the ephemeral range, so a test can stop it (its port
// then refuses connections) and start it again on the same port with the same ledger.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <boost/json/serialize.hpp>

#include <csignal>
#include <filesystem>
#include <future>
#include <thread>

#include "charge_outbox/util/sha256.hpp"
#include "charge_outbox/util/time.hpp"
#include "charge_stack.hpp"
#include "http_test_client.hpp"
#include "pg_test_database.hpp"
#include "service_process.hpp"
#include "test_env.hpp"

namespace charge_outbox::testing {
namespace {

namespace fs = std::filesystem;
namespace json = boost::json;
using namespace std::chrono_literals;
using ::testing::HasSubstr;

constexpr const char* kMerchant = "00000000-0000-4000-8000-000000000001";
constexpr const char* kApiKey = "sk_test_money_safety";
constexpr const char* kAcquirerKey = "ak_test_money_safety";

std::string ChargeBody(std::int64_t amount = 25000) {
  return R"({"amount": )" + std::to_string(amount) +
         R"(, "currency": "BRL", "order_id": "PED-1", "payment_method": "pm_tok_visa"})";
}

HttpHeaders ChargeHeaders(const std::string& key) {
  return {{"Authorization", std::string("Bearer ") + kApiKey},
          {"Content-Type", "application/json"},
          {"Idempotency-Key", key}};
}

class MoneySafetyE2E : public ::testing::Test {
 protected:
  void SetUp() override {
    db_ = PgTestDatabase::Create(::testing::UnitTest::GetInstance()->current_test_info()->name(),
                                 PgTestDatabase::Schema::kMigrated);
    InsertMerchant(*db_, kMerchant, kApiKey);
    dir_ = fs::temp_directory_path() / UniqueName("money_safety_e2e");
    sim_port_ = FreeLoopbackPort();
    StartAcquirer();
  }

  void TearDown() override {
    sim_client_.reset();
    sim_.reset();
    fs::remove_all(dir_);
  }

  void StartAcquirer() {
    sim_ = std::make_unique<ServiceProcess>(std::vector<std::string>{ACQUIRER_SIM_BIN},
                                            EnvChanges{{"HTTP_PORT", std::to_string(sim_port_)},
                                                       {"DATA_DIR", (dir_ / "sim").string()},
                                                       {"AUTH_API_KEYS", kAcquirerKey}});
    sim_client_ = std::make_unique<HttpTestClient>(sim_port_);
  }

  // SIGKILL: the acquirer's port refuses connections until StartAcquirer. Its ledger survives.
  void StopAcquirer() {
    sim_client_.reset();
    sim_->process().Signal(SIGKILL);
    sim_->process().Wait(10s);
    sim_.reset();
  }

  std::unique_ptr<ServiceProcess> StartApi(const EnvChanges& extra = {}) {
    auto env = FastChargeApiEnv(db_->url(), sim_port_, kAcquirerKey);
    for (const auto& [k, v] : extra) env[k] = v;
    return std::make_unique<ServiceProcess>(std::vector<std::string>{CHARGE_API_BIN}, env);
  }

  static HttpResult Post(ServiceProcess& api, const std::string& key, const std::string& body = ChargeBody()) {
    HttpTestClient client(api.port(), "127.0.0.1", 30s);
    return client.Post("/v1/charges", body, ChargeHeaders(key));
  }

  static HttpResult Get(ServiceProcess& api, const std::string& public_id) {
    HttpTestClient client(api.port(), "127.0.0.1", 30s);
    return client.Get("/v1/charges/" + public_id, {{"Authorization", std::string("Bearer ") + kApiKey}});
  }

  // Posts until the answer is something other than 409 (the dead owner's lease running out).
  static HttpResult PostPastTheLease(ServiceProcess& api, const std::string& key,
                                     const std::string& body = ChargeBody()) {
    HttpResult r;
    const bool answered = Eventually(
        [&] {
          r = Post(api, key, body);
          return !r.ok() || r.status() != 409u;
        },
        20s);
    EXPECT_TRUE(answered) << "still 409 after 20 s";
    return r;
  }

  // charge-api dies (SIGKILL) at `failpoint` while serving `key`: a dead owner is left behind.
  void CrashAt(const std::string& failpoint, const std::string& key, const std::string& body = ChargeBody()) {
    auto api = StartApi({{"FAILPOINTS", failpoint + "=crash"}});
    const auto r = Post(*api, key, body);
    EXPECT_FALSE(r.ok()) << "the request should die with the process, got " << r.status();
    EXPECT_EQ(api->process().Wait(10s).term_signal, SIGKILL);
  }

  ProcessResult RunReconciler(const EnvChanges& extra = {}) {
    EnvChanges env{{"DATABASE_URL", db_->url()},
                   {"ACQUIRER_URL", "http://127.0.0.1:" + std::to_string(sim_port_)},
                   {"ACQUIRER_API_KEY", kAcquirerKey},
                   {"ACQUIRER_REQUEST_TIMEOUT", "500ms"},
                   {"ACQUIRER_RETRY_MAX_ATTEMPTS", "2"},
                   {"ACQUIRER_RETRY_BACKOFF_BASE", "50ms"},
                   {"ACQUIRER_RETRY_BACKOFF_MAX", "100ms"},
                   {"ACQUIRER_RETRY_BACKOFF_BUDGET", "500ms"},
                   {"RECONCILER_GRACE_PERIOD", "0s"},
                   {"RECONCILER_CLAIM_LEASE", "2s"},
                   {"RECONCILER_BACKOFF_BASE", "100ms"},
                   {"RECONCILER_BACKOFF_MAX", "200ms"},
                   {"RECONCILER_VISIBILITY_WINDOW", "1s"},
                   {"FAILPOINTS", std::nullopt},
                   {"METRICS_PUSHGATEWAY_URL", std::nullopt}};
    for (const auto& [k, v] : extra) env[k] = v;
    return RunProcess({RECONCILER_BIN}, env, 60s);
  }

  void SetFaults(const std::string& profile) {
    const auto r = sim_client_->Put("/admin/faults", profile);
    ASSERT_EQ(r.status(), 200u) << r.response.body();
  }

  json::array Ledger() { return AcquirerLedger(*sim_client_); }
  static std::string AcquirerKey(const std::string& key) { return std::string(kMerchant) + ":" + key; }
  std::size_t LedgerCaptures(const std::string& acquirer_key) {
    return AcquirerLedgerCount(*sim_client_, "capture", acquirer_key);
  }
  // How many requests of `operation` ("capture", "lookup", "void", "list") acquirer-sim has received.
  std::int64_t AcquirerRequests(const std::string& operation) {
    return sim_client_->Get("/admin/stats").json().at("requests").at(operation).as_int64();
  }

  std::string Field(const std::string& key, const std::string& column) {
    return db_->Scalar("SELECT " + column + " FROM charges WHERE idempotency_key = '" + key + "'");
  }
  std::string Events(const std::string& key) {
    return db_->Scalar("SELECT string_agg(type, ',' ORDER BY sequence) FROM outbox WHERE aggregateid = "
                       "(SELECT charge_public_id(id) FROM charges WHERE idempotency_key = '" + key + "')");
  }

  std::string VoidAtTheAcquirer(const std::string& capture_id, const std::string& void_key) {
    const auto r = sim_client_->Post("/v1/captures/" + capture_id + "/void", "",
                                     {{"Authorization", std::string("Bearer ") + kAcquirerKey},
                                      {"Idempotency-Key", void_key}});
    EXPECT_EQ(r.status(), 200u) << r.response.body();
    return r.response.body();
  }

  std::unique_ptr<PgTestDatabase> db_;
  fs::path dir_;
  int sim_port_ = 0;
  std::unique_ptr<ServiceProcess> sim_;
  std::unique_ptr<HttpTestClient> sim_client_;
};

// Defect 1: the combination that told a client "no money was taken" while the acquirer held the capture.
TEST_F(MoneySafetyE2E, CrashAfterCaptureThenAcquirerDownDuringTheRetryStaysPendingNeverFailed) {
  CrashAt("charge.after_acquirer_response", "d1");
  ASSERT_EQ(LedgerCaptures(AcquirerKey("d1")), 1u);
  StopAcquirer();

  auto api = StartApi();
  const auto during = PostPastTheLease(*api, "d1");
  ASSERT_TRUE(during.ok()) << during.error.message();
  EXPECT_EQ(during.status(), 202u) << during.response.body();
  EXPECT_EQ(during.json().at("status").as_string(), "pending");
  EXPECT_EQ(Field("d1", "status"), "pending");
  EXPECT_EQ(Field("d1", "owner_id IS NULL"), "t");  // given back: the next retry may take over at once
  EXPECT_EQ(db_->Scalar("SELECT count(*) FROM acquirer_attempts WHERE outcome = 'not_sent'"), "2");

  StartAcquirer();
  const auto after = Post(*api, "d1");
  ASSERT_EQ(after.status(), 201u) << after.response.body();
  EXPECT_EQ(after.json().at("status").as_string(), "captured");
  EXPECT_EQ(after.json().at("acquirer_capture_id"), Ledger().at(0).at("id"));
  EXPECT_EQ(LedgerCaptures(AcquirerKey("d1")), 1u);
  EXPECT_EQ(Events("d1"), "payments.charge.initiated.v1,payments.charge.captured.v1");
}

// Defect 1, first run: a first capture run that never left the process may still conclude `failed`.
TEST_F(MoneySafetyE2E, AFirstCaptureThatNeverLeftTheProcessFails) {
  StopAcquirer();
  auto api = StartApi();
  const auto r = Post(*api, "d1-first");
  EXPECT_EQ(r.status(), 402u) << r.response.body();
  EXPECT_EQ(Field("d1-first", "status || '/' || failure_reason"), "failed/acquirer_unreachable");
}

// Defect 2: someone voided the capture after charge-api died; the takeover's lookup sees it voided.
TEST_F(MoneySafetyE2E, ATakeoverThatFindsTheCaptureVoidedNeverAnswersCaptured) {
  CrashAt("charge.after_acquirer_response", "d2");
  const auto capture_id = std::string(Ledger().at(0).at("id").as_string());
  VoidAtTheAcquirer(capture_id, "someone-else");

  auto api = StartApi();
  const auto r = PostPastTheLease(*api, "d2");
  EXPECT_EQ(r.status(), 202u) << r.response.body();
  EXPECT_EQ(r.json().at("status").as_string(), "needs_review");
  EXPECT_EQ(Field("d2", "status || '/' || failure_reason"), "needs_review/acquirer_capture_voided");
  EXPECT_EQ(Events("d2"), "payments.charge.initiated.v1,payments.charge.needs_review.v1");
}

// Defect 2, past the deadline: a voided capture is our own void whose result was lost.
TEST_F(MoneySafetyE2E, PastTheDeadlineATakeoverThatFindsTheCaptureVoidedRecordsCanceled) {
  CrashAt("charge.after_acquirer_response", "d2-old");
  db_->Execute("UPDATE charges SET created_at = now() - interval '2 hours'");
  VoidAtTheAcquirer(std::string(Ledger().at(0).at("id").as_string()), AcquirerKey("d2-old"));

  auto api = StartApi();
  const auto r = PostPastTheLease(*api, "d2-old");
  EXPECT_EQ(r.status(), 402u) << r.response.body();
  EXPECT_EQ(Field("d2-old", "status || '/' || failure_reason"), "canceled/deadline_passed_voided");
  EXPECT_EQ(Events("d2-old"), "payments.charge.initiated.v1,payments.charge.canceled.v1");
}

// Defect 3: charge-api holds proof of a capture, but the reconciler (policy `fail`, the capture invisible
// to its lookups) failed the charge meanwhile. Proof of money against a no-money state goes to review.
TEST_F(MoneySafetyE2E, ACaptureProvenAfterAnotherActorFailedTheChargeEndsInReview) {
  SetFaults(R"({"visibility_delay_ms": 120000})");
  auto api = StartApi({{"FAILPOINTS", "charge.after_acquirer_response=sleep(10000)"}});
  auto answer = std::async(std::launch::async, [&] { return Post(*api, "d3"); });
  ASSERT_TRUE(Eventually([&] { return LedgerCaptures(AcquirerKey("d3")) == 1u; }));
  // charge-api's lease (3 s) runs out while it sleeps with the capture's answer in hand.
  ASSERT_TRUE(Eventually([&] { return Field("d3", "lease_expires_at < now()") == "t"; }, 8s));
  const EnvChanges fail_policy{{"RECONCILER_NOT_FOUND_POLICY", "fail"}};
  RunReconciler(fail_policy);
  std::this_thread::sleep_for(1100ms);  // the visibility window (1 s) since the first not-found look
  db_->Execute("UPDATE charges SET next_check_at = now()");
  RunReconciler(fail_policy);
  ASSERT_EQ(Field("d3", "status"), "failed");

  const auto r = answer.get();
  ASSERT_TRUE(r.ok()) << r.error.message();
  EXPECT_EQ(r.status(), 202u) << r.response.body();
  EXPECT_EQ(r.json().at("status").as_string(), "needs_review");
  EXPECT_EQ(Field("d3", "status"), "needs_review");
  EXPECT_EQ(Field("d3", "failure_reason"), "acquirer_capture_contradicts_failed");
  EXPECT_EQ(Events("d3"),
            "payments.charge.initiated.v1,payments.charge.failed.v1,payments.charge.needs_review.v1");
  EXPECT_THAT(api->Output(), HasSubstr(R"("level":"error")"));
  EXPECT_THAT(api->Output(), HasSubstr("acquirer_capture_contradicts_failed"));
  // What the client is told from now on agrees with GET.
  const auto replay = Post(*api, "d3");
  EXPECT_EQ(replay.status(), 202u);
  EXPECT_EQ(replay.json().at("status").as_string(), "needs_review");
}

// Defect 4: an attempt that cannot be recorded is not sent. Attempt 1 (recorded with the intent) times
// out after capturing; attempt 2 cannot be recorded, so it must not reach the acquirer.
TEST_F(MoneySafetyE2E, AnAttemptThatCannotBeRecordedIsNotSent) {
  db_->Execute(
      "CREATE FUNCTION refuse_later_attempts() RETURNS trigger LANGUAGE plpgsql AS $$"
      " BEGIN RAISE EXCEPTION 'attempts table refuses attempt %', NEW.attempt_no; END $$;"
      "CREATE TRIGGER refuse_later_attempts BEFORE INSERT ON acquirer_attempts"
      " FOR EACH ROW WHEN (NEW.attempt_no > 1) EXECUTE FUNCTION refuse_later_attempts()");
  SetFaults(R"({"timeout_rate": 1.0, "timeout_delay_ms": 3000})");
  auto api = StartApi({{"ACQUIRER_REQUEST_TIMEOUT", "500ms"}});  // room in the 1 s budget for attempt 2
  const auto r = Post(*api, "d4");
  EXPECT_EQ(r.status(), 202u) << r.response.body();
  EXPECT_EQ(Field("d4", "status"), "pending");
  EXPECT_EQ(AcquirerRequests("capture"), 1);
  EXPECT_EQ(db_->Scalar("SELECT string_agg(attempt_no || ':' || outcome, ',') FROM acquirer_attempts"),
            "1:timed_out");
}

// Defect 5: a failure inferred from absence lands only while its actor still holds the charge. The
// reconciler (policy `fail`) concludes "not captured" from two looks and stalls before writing it; its
// claim runs out, charge-api's retry takes the charge over and holds the capture's answer; the
// reconciler's write comes in the middle of it.
TEST_F(MoneySafetyE2E, AnInferredFailureNeverLandsAfterItsActorLostTheCharge) {
  SetFaults(R"({"visibility_delay_ms": 120000})");
  CrashAt("charge.after_acquirer_response", "d5");
  ASSERT_EQ(LedgerCaptures(AcquirerKey("d5")), 1u);
  ASSERT_TRUE(Eventually([&] { return Field("d5", "lease_expires_at < now()") == "t"; }, 8s));
  const EnvChanges fail_policy{{"RECONCILER_NOT_FOUND_POLICY", "fail"}};
  RunReconciler(fail_policy);  // the first not-found look
  std::this_thread::sleep_for(1100ms);
  db_->Execute("UPDATE charges SET next_check_at = now()");
  auto api = StartApi({{"FAILPOINTS", "charge.after_acquirer_response=sleep(4000)"}});

  // The second look concludes "not captured", then stalls 5 s before writing: its 2 s claim runs out.
  auto reconciler = std::async(std::launch::async, [&] {
    auto env = fail_policy;
    env["FAILPOINTS"] = "reconciler.before_transition=sleep(5000)";
    return RunReconciler(env);
  });
  ASSERT_TRUE(Eventually([&] {
    return db_->Scalar("SELECT count(*) FROM acquirer_attempts WHERE actor = 'reconciler'") == "2";
  }));
  ASSERT_TRUE(Eventually([&] { return Field("d5", "lease_expires_at < now()") == "t"; }, 8s));
  // The client's retry takes over, learns the capture (the acquirer replays it for the same key) and
  // holds the answer 4 s: the reconciler wakes and writes in the middle of it.
  const auto r = Post(*api, "d5");
  const auto run = reconciler.get();
  EXPECT_EQ(r.status(), 201u) << r.response.body() << "\n" << run.out;
  EXPECT_EQ(Field("d5", "status"), "captured");
  EXPECT_EQ(Events("d5"), "payments.charge.initiated.v1,payments.charge.captured.v1");
  EXPECT_EQ(LedgerCaptures(AcquirerKey("d5")), 1u);
  EXPECT_THAT(run.out, HasSubstr("not applied"));
}

// Defects 5 and 1, from charge-api's side and with the failpoints of the first release: the first owner
// finds the acquirer down and stalls with "nothing was sent" in hand; its lease runs out; a retry on
// another instance takes the charge over and captures (slowly); the first owner wakes in the middle of it.
// Its inference must not land: the client that retried is told 201, never 402 for a capture.
TEST_F(MoneySafetyE2E, AFirstOwnerWakingWithNothingSentNeverFailsACaptureInProgress) {
  StopAcquirer();
  auto first_owner = StartApi({{"FAILPOINTS", "charge.after_acquirer_response=sleep(6000)"}});
  auto first = std::async(std::launch::async, [&] { return Post(*first_owner, "d5-api"); });
  ASSERT_TRUE(Eventually([&] { return Field("d5-api", "lease_expires_at < now()") == "t"; }, 8s));
  StartAcquirer();
  SetFaults(R"({"latency": {"distribution": "fixed", "ms": 5000}, "apply_to": ["capture"]})");
  auto retrying = StartApi({{"ACQUIRER_REQUEST_TIMEOUT", "6s"},
                            {"ACQUIRER_RETRY_BACKOFF_BUDGET", "200ms"},
                            {"CHARGE_LEASE", "6500ms"},
                            {"SHUTDOWN_DEADLINE", "7s"}});
  const auto second = Post(*retrying, "d5-api");
  const auto answered_first = first.get();
  EXPECT_EQ(second.status(), 201u) << second.response.body();
  EXPECT_NE(answered_first.status(), 402u) << answered_first.response.body();
  EXPECT_EQ(Field("d5-api", "status"), "captured");
  EXPECT_EQ(Events("d5-api"), "payments.charge.initiated.v1,payments.charge.captured.v1");
  EXPECT_EQ(LedgerCaptures(AcquirerKey("d5-api")), 1u);
}

// Defect 6: the loser of a concurrent completion answers what won, never `pending` for a terminal charge.
// The winner (as the reconciler would write it) holds the row while charge-api's result statement waits.
TEST_F(MoneySafetyE2E, TheLoserOfAConcurrentCompletionAnswersWhatWon) {
  auto api = StartApi({{"FAILPOINTS", "charge.after_acquirer_response=sleep(1500)"}});
  auto answer = std::async(std::launch::async, [&] { return Post(*api, "d6"); });
  ASSERT_TRUE(Eventually([&] { return LedgerCaptures(AcquirerKey("d6")) == 1u; }));
  const auto capture_id = std::string(Ledger().at(0).at("id").as_string());
  const auto winner = RunProcess(
      {"/usr/bin/psql", "-X", "-q", "-v", "ON_ERROR_STOP=1", db_->url(), "-c",
       "BEGIN;"
       " WITH upd AS (UPDATE charges SET status = 'captured', acquirer_capture_id = '" + capture_id + "',"
       "   updated_at = now(), last_sequence = last_sequence + 1, owner_id = NULL, lease_expires_at = NULL"
       "   RETURNING *)"
       " INSERT INTO outbox (id, aggregateid, type, payload, sequence, shard)"
       " SELECT gen_random_uuid(), charge_public_id(upd.id), 'payments.charge.captured.v1',"
       "   charge_event_payload(ROW(upd.*)::charges), upd.last_sequence, outbox_shard(upd.id) FROM upd;"
       " SELECT pg_sleep(4);"
       " COMMIT;"},
      {}, 30s);
  ASSERT_EQ(winner.exit_code, 0) << winner.err;
  const auto r = answer.get();
  ASSERT_TRUE(r.ok()) << r.error.message();
  EXPECT_EQ(r.status(), 201u) << r.response.body();
  EXPECT_EQ(r.json().at("status").as_string(), "captured");
  EXPECT_EQ(Events("d6"), "payments.charge.initiated.v1,payments.charge.captured.v1");
}

// Defect 7: `<merchant uuid>:<key>` passes the acquirer's 255-character limit for keys of 219 to 255
// characters; the acquirer key is then `<merchant uuid>#<sha256 of the key>`, in charge-api and the
// reconciler alike.
TEST_F(MoneySafetyE2E, ALongIdempotencyKeyCapturesAndTheReconcilerFindsItByTheSameAcquirerKey) {
  std::string long_key(240, 'k');
  long_key.replace(0, 5, "long-");
  auto api = StartApi();
  const auto r = Post(*api, long_key);
  EXPECT_EQ(r.status(), 201u) << r.response.body();
  const auto acquirer_key = std::string(kMerchant) + "#" + util::Sha256Hex(long_key);
  EXPECT_EQ(LedgerCaptures(acquirer_key), 1u);

  std::string crashed_key(255, 'c');
  CrashAt("charge.after_acquirer_response", crashed_key);
  const auto crashed_acquirer_key = std::string(kMerchant) + "#" + util::Sha256Hex(crashed_key);
  ASSERT_EQ(LedgerCaptures(crashed_acquirer_key), 1u);
  ASSERT_TRUE(Eventually([&] { return Field(crashed_key, "lease_expires_at < now()") == "t"; }, 8s));
  RunReconciler();
  EXPECT_EQ(Field(crashed_key, "status"), "captured");
  EXPECT_EQ(LedgerCaptures(crashed_acquirer_key), 1u);
  const auto replay = Post(*api, crashed_key);
  EXPECT_EQ(replay.status(), 201u);
  EXPECT_EQ(replay.header("Idempotent-Replayed"), "true");
}

// Defect 8: past the deadline a takeover never captures; it looks up, and leaves the rest to the
// reconciler's void and review path.
TEST_F(MoneySafetyE2E, PastTheDeadlineATakeoverNeverCaptures) {
  CrashAt("charge.after_intent_commit", "d8");
  db_->Execute("UPDATE charges SET created_at = now() - interval '2 hours'");
  auto api = StartApi();
  const auto r = PostPastTheLease(*api, "d8");
  EXPECT_EQ(r.status(), 202u) << r.response.body();
  EXPECT_EQ(r.json().at("status").as_string(), "pending");
  EXPECT_EQ(AcquirerRequests("capture"), 0);
  EXPECT_TRUE(Ledger().empty());

  const auto run = RunReconciler();
  EXPECT_EQ(Field("d8", "status || '/' || failure_reason"), "needs_review/deadline_passed_unconfirmed") << run.out;
  EXPECT_EQ(Post(*api, "d8").json().at("status").as_string(), "needs_review");
  EXPECT_TRUE(Ledger().empty());
}

// Defect 8, a capture found past the deadline: charge-api leaves it to the reconciler, which voids it.
TEST_F(MoneySafetyE2E, PastTheDeadlineATakeoverLeavesAFoundCaptureToTheReconcilersVoid) {
  CrashAt("charge.after_acquirer_response", "d8-found");
  db_->Execute("UPDATE charges SET created_at = now() - interval '2 hours'");
  auto api = StartApi();
  const auto r = PostPastTheLease(*api, "d8-found");
  EXPECT_EQ(r.status(), 202u) << r.response.body();
  EXPECT_EQ(Field("d8-found", "status"), "pending");

  RunReconciler();
  EXPECT_EQ(Field("d8-found", "status || '/' || failure_reason"), "canceled/deadline_passed_voided");
  EXPECT_EQ(AcquirerLedgerCount(*sim_client_, "void", AcquirerKey("d8-found")), 1u);
  EXPECT_EQ(Post(*api, "d8-found").status(), 402u);
}

// Defect 9: a takeover runs two acquirer operations (lookup, then capture); its lease covers both, so a
// retry arriving after the first operation's share of the lease still finds a live owner.
TEST_F(MoneySafetyE2E, ATakeoverKeepsItsLeaseAcrossLookupAndCapture) {
  CrashAt("charge.after_intent_commit", "d9");
  ASSERT_TRUE(Eventually([&] { return Field("d9", "lease_expires_at < now()") == "t"; }, 8s));
  SetFaults(R"({"latency": {"distribution": "fixed", "ms": 2800}, "apply_to": ["capture", "lookup"]})");
  const EnvChanges slow{{"ACQUIRER_REQUEST_TIMEOUT", "3200ms"},
                        {"ACQUIRER_RETRY_BACKOFF_BUDGET", "200ms"},
                        {"CHARGE_LEASE", "3500ms"},
                        {"SHUTDOWN_DEADLINE", "4s"}};
  auto api = StartApi(slow);
  auto first = std::async(std::launch::async, [&] { return Post(*api, "d9"); });
  ASSERT_TRUE(Eventually([&] { return Field("d9", "owner_id LIKE '%/%' AND lease_expires_at > now()") == "t"; }));
  const auto taken_until = Field("d9", "(extract(epoch FROM lease_expires_at - now()) * 1000)::bigint");
  // Past the lease the takeover started with, while it is still capturing.
  std::this_thread::sleep_for(std::chrono::milliseconds{std::stoll(taken_until)} + 300ms);
  const auto second = Post(*api, "d9");
  EXPECT_EQ(second.status(), 409u) << second.response.body();
  const auto r = first.get();
  EXPECT_EQ(r.status(), 201u) << r.response.body();
  EXPECT_EQ(LedgerCaptures(AcquirerKey("d9")), 1u);
  EXPECT_EQ(AcquirerRequests("lookup"), 1);
  EXPECT_EQ(Events("d9"), "payments.charge.initiated.v1,payments.charge.captured.v1");
}

// Defect 10: a captured charge the window report flags for review answers the same everywhere: the
// replay, GET and the event say `needs_review`.
TEST_F(MoneySafetyE2E, AFlaggedChargeAnswersTheSameOnReplayGetAndEvents) {
  const auto from = std::chrono::system_clock::now() - 1s;
  auto api = StartApi();
  const auto first = Post(*api, "d10");
  ASSERT_EQ(first.status(), 201u) << first.response.body();
  const auto id = std::string(first.json().at("id").as_string());
  VoidAtTheAcquirer(std::string(first.json().at("acquirer_capture_id").as_string()), "someone-else");
  const auto to = std::chrono::system_clock::now() + 1s;
  // Only a settled window flags: one that closed at least a visibility window ago.
  std::this_thread::sleep_until(to + 1200ms);
  const auto report = RunProcess({RECONCILER_BIN, "window", "--from", util::FormatRfc3339(from), "--to",
                                  util::FormatRfc3339(to)},
                                 {{"DATABASE_URL", db_->url()},
                                  {"ACQUIRER_URL", "http://127.0.0.1:" + std::to_string(sim_port_)},
                                  {"ACQUIRER_API_KEY", kAcquirerKey},
                                  {"RECONCILER_VISIBILITY_WINDOW", "1s"},
                                  {"METRICS_PUSHGATEWAY_URL", std::nullopt}},
                                 60s);
  ASSERT_EQ(report.exit_code, 0) << report.out << report.err;
  ASSERT_EQ(Field("d10", "status"), "needs_review");

  const auto replay = Post(*api, "d10");
  const auto got = Get(*api, id);
  EXPECT_EQ(replay.header("Idempotent-Replayed"), "true");
  EXPECT_EQ(replay.status(), 202u);
  EXPECT_EQ(replay.json().at("status").as_string(), "needs_review");
  EXPECT_EQ(got.json().at("status").as_string(), "needs_review");
  EXPECT_EQ(replay.json(), got.json());
  EXPECT_EQ(db_->Scalar("SELECT payload->>'status' FROM outbox WHERE type = 'payments.charge.needs_review.v1'"),
            "needs_review");
}

}  // namespace
}  // namespace charge_outbox::testing
