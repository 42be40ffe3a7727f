// Issue 14, defect 9: a noisy neighbour at the acquirer pool. When every acquirer connection of an
// instance is busy and its queue is full, a new charge hears 503 with Retry-After before its intent is
// written: our own queue is not an acquirer answer, so it must neither fail the charge (402, burning the
// client's key) nor store anything. charge-api and acquirer-sim run as processes on a real PostgreSQL.
#include <gtest/gtest.h>

#include <boost/json/parse.hpp>

#include <filesystem>
#include <future>
#include <thread>

#include "charge_stack.hpp"
#include "http_test_client.hpp"
#include "pg_test_database.hpp"
#include "service_process.hpp"
#include "test_env.hpp"

namespace charge_outbox::testing {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;

constexpr const char* kMerchant = "00000000-0000-4000-8000-0000000000b1";
constexpr const char* kApiKey = "sk_test_acquirer_busy";
constexpr const char* kAcquirerKey = "ak_test_acquirer_busy";

HttpResult PostCharge(std::uint16_t port, const std::string& key, const std::string& order = "PED-1") {
  HttpTestClient client(port, "127.0.0.1", 30s);
  return client.Post("/v1/charges",
                     R"({"amount": 1000, "currency": "BRL", "order_id": ")" + order +
                         R"(", "payment_method": "pm_tok_visa"})",
                     {{"Authorization", std::string("Bearer ") + kApiKey},
                      {"Content-Type", "application/json"},
                      {"Idempotency-Key", key}});
}

TEST(AcquirerBusyE2E, AChargeBeyondThePoolAndItsQueueIs503BeforeItsIntentAndItsRetryCaptures) {
  const auto db = PgTestDatabase::Create("acquirer_busy", PgTestDatabase::Schema::kMigrated);
  InsertMerchant(*db, kMerchant, kApiKey);
  const auto dir = fs::temp_directory_path() / UniqueName("acquirer_busy_e2e");
  const int sim_port = FreeLoopbackPort();
  ServiceProcess sim({ACQUIRER_SIM_BIN}, EnvChanges{{"HTTP_PORT", std::to_string(sim_port)},
                                                    {"DATA_DIR", (dir / "sim").string()},
                                                    {"AUTH_API_KEYS", kAcquirerKey}});
  HttpTestClient sim_client(static_cast<std::uint16_t>(sim_port));
  // Each capture holds its connection 1.5 s, well inside the 3 s call timeout.
  ASSERT_EQ(sim_client.Put("/admin/faults", R"({"latency": {"distribution": "fixed", "ms": 1500}})").status(), 200u);

  auto env = FastChargeApiEnv(db->url(), sim_port, kAcquirerKey);
  env["ACQUIRER_POOL_MAX_CONNECTIONS"] = "1";
  env["ACQUIRER_POOL_MAX_QUEUED"] = "0";
  env["ACQUIRER_REQUEST_TIMEOUT"] = "3s";
  env["CHARGE_LEASE"] = "6s";
  env["SHUTDOWN_DEADLINE"] = "4s";
  ServiceProcess api({CHARGE_API_BIN}, env);

  auto first = std::async(std::launch::async, [&] { return PostCharge(api.port(), "busy-first"); });
  // The first charge is at the acquirer (its intent written) before the second arrives.
  ASSERT_TRUE(Eventually([&] { return db->Scalar("SELECT count(*) FROM charges") == "1"; }, 5s));
  const auto second = PostCharge(api.port(), "busy-second");
  EXPECT_EQ(second.status(), 503u) << second.response.body();
  EXPECT_EQ(second.response["Retry-After"], "1");
  EXPECT_EQ(second.response["Content-Type"], "application/problem+json");
  const auto problem = boost::json::parse(second.response.body()).as_object();
  EXPECT_TRUE(problem.at("type").as_string().ends_with("acquirer-busy")) << second.response.body();
  // Nothing stored, nothing sent: no row, no event, no capture for its key.
  EXPECT_EQ(db->Scalar("SELECT count(*) FROM charges WHERE idempotency_key = 'busy-second'"), "0");
  EXPECT_EQ(db->Scalar("SELECT count(*) FROM outbox"), "1");  // the first charge's intent only

  const auto first_answer = first.get();
  EXPECT_EQ(first_answer.status(), 201u) << first_answer.response.body();
  // The place is free again: the client's retry with the same key is the charge's first request.
  const auto retried = PostCharge(api.port(), "busy-second");
  EXPECT_EQ(retried.status(), 201u) << retried.response.body();
  EXPECT_EQ(retried.response.count("Idempotent-Replayed"), 0u);
  EXPECT_EQ(AcquirerLedgerCount(sim_client, "capture", std::string(kMerchant) + ":busy-second"), 1u);
  fs::remove_all(dir);
}

// Issue 41, defect 2: a charge whose only attempt waited out its deadline in our own acquirer queue was
// answered 503 acquirer-busy after its intent: nothing was sent, and the client was told only to retry.
// This client starts over under a new key instead (the text no longer invites it, but clients do) and is
// charged once: the reconciler fails the first charge, it never captures it behind the client's back.
// Before the fix the default policy resubmitted it after two not-found looks, and the order was captured
// twice. The first charge is the state charge-api's busy answer leaves (ChargeServiceTest covers the
// answer itself: a queue timing out after the intent needs arrivals within the same millisecond here).
TEST(AcquirerBusyE2E, AClientThatStartsOverAfterABusy503IsChargedOnce) {
  const auto db = PgTestDatabase::Create("acquirer_busy_rekey", PgTestDatabase::Schema::kMigrated);
  InsertMerchant(*db, kMerchant, kApiKey);
  const auto dir = fs::temp_directory_path() / UniqueName("acquirer_busy_rekey_e2e");
  const int sim_port = FreeLoopbackPort();
  ServiceProcess sim({ACQUIRER_SIM_BIN}, EnvChanges{{"HTTP_PORT", std::to_string(sim_port)},
                                                    {"DATA_DIR", (dir / "sim").string()},
                                                    {"AUTH_API_KEYS", kAcquirerKey}});
  HttpTestClient sim_client(static_cast<std::uint16_t>(sim_port));
  ServiceProcess api({CHARGE_API_BIN}, FastChargeApiEnv(db->url(), sim_port, kAcquirerKey));

  // As charge-api leaves a charge it answered 503 acquirer-busy: pending, its lease given back, attempt 1
  // finished not_sent (pool_timed_out never leaves the process).
  db->Execute(
      "WITH ins AS ("
      " INSERT INTO charges (id, merchant_id, idempotency_key, request_fingerprint, order_id, amount, currency,"
      "  payment_method, last_sequence, attempt_count)"
      " VALUES (gen_random_uuid(), '" + std::string(kMerchant) + "', 'rekey-c', sha256('busy'::bytea), 'PED-C', 1000,"
      "  'BRL', 'pm_tok_visa', 1, 1) RETURNING *"
      "), ev AS ("
      " INSERT INTO outbox (id, aggregateid, type, payload, sequence, shard)"
      " SELECT gen_random_uuid(), charge_public_id(ins.id), 'payments.charge.initiated.v1',"
      "  charge_event_payload(ROW(ins.*)::charges), 1, outbox_shard(ins.id) FROM ins"
      ") INSERT INTO acquirer_attempts (charge_id, attempt_no, request_id, operation, actor, started_at, finished_at,"
      "  outcome, evidence)"
      " SELECT ins.id, 1, gen_random_uuid(), 'capture', 'charge-api', now(), now(), 'not_sent', 'not_sent' FROM ins");

  // The client gives up on its key and checks out the same order again under a new one.
  const auto again = PostCharge(api.port(), "rekey-c2", "PED-C");
  ASSERT_EQ(again.status(), 201u) << again.response.body();

  // The reconciler, run as its CronJob runs it, until the first charge is settled.
  const EnvChanges reconciler{{"DATABASE_URL", db->url()},
                              {"ACQUIRER_URL", "http://127.0.0.1:" + std::to_string(sim_port)},
                              {"ACQUIRER_API_KEY", kAcquirerKey},
                              {"ACQUIRER_REQUEST_TIMEOUT", "2s"},
                              {"ACQUIRER_RETRY_BACKOFF_BUDGET", "1s"},
                              {"RECONCILER_GRACE_PERIOD", "0s"},
                              {"RECONCILER_VISIBILITY_WINDOW", "1s"},
                              {"RECONCILER_BACKOFF_BASE", "100ms"},
                              {"RECONCILER_BACKOFF_MAX", "200ms"},
                              {"FAILPOINTS", std::nullopt},
                              {"METRICS_PUSHGATEWAY_URL", std::nullopt}};
  const auto status_of_c = [&] { return db->Scalar("SELECT status FROM charges WHERE idempotency_key = 'rekey-c'"); };
  ASSERT_TRUE(Eventually(
      [&] {
        RunProcess({RECONCILER_BIN}, reconciler, 30s);
        return status_of_c() != "pending";
      },
      30s))
      << "still pending";
  EXPECT_EQ(status_of_c(), "failed");
  EXPECT_EQ(db->Scalar("SELECT failure_reason FROM charges WHERE idempotency_key = 'rekey-c'"), "acquirer_unreachable");
  EXPECT_EQ(AcquirerLedgerCount(sim_client, "capture", std::string(kMerchant) + ":rekey-c"), 0u);
  // The order is captured once, under the key the client used the second time.
  std::size_t order_c = 0;
  for (const auto& e : AcquirerLedger(sim_client)) {
    const auto key = std::string(e.at("idempotency_key").as_string());
    if (e.at("type").as_string() == "capture" && (key.ends_with(":rekey-c") || key.ends_with(":rekey-c2"))) ++order_c;
  }
  EXPECT_EQ(order_c, 1u);
  // And the first key's answer is now definitive: no money was taken.
  HttpTestClient client(api.port(), "127.0.0.1", 30s);
  const auto got = client.Get("/v1/charges?idempotency_key=rekey-c", {{"Authorization", std::string("Bearer ") + kApiKey}});
  EXPECT_EQ(got.json().at("status").as_string(), "failed") << got.response.body();
  fs::remove_all(dir);
}

}  // namespace
}  // namespace charge_outbox::testing
