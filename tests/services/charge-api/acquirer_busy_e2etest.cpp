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

HttpResult PostCharge(std::uint16_t port, const std::string& key) {
  HttpTestClient client(port, "127.0.0.1", 30s);
  return client.Post("/v1/charges",
                     R"({"amount": 1000, "currency": "BRL", "order_id": "PED-1", "payment_method": "pm_tok_visa"})",
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

}  // namespace
}  // namespace charge_outbox::testing
