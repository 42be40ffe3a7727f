// Issue 41, defect 8: host clocks decide nothing the database should. charge-api runs with its wall clock
// 7 minutes ahead (libfaketime, from Debian's faketime; its monotonic clock left alone) against a real
// PostgreSQL: the times it records (an attempt's started_at and finished_at, the charge's updated_at, its
// events' created_at, which is their ce_time) and the time in its stored answer are the database's. Before
// the fix they were the host's, 7 minutes in the future: a lookup made after the capture on a sane host
// read as made before it, and an event could sort ahead of one written after it.
#include <gtest/gtest.h>

#include <filesystem>

#include "charge_stack.hpp"
#include "http_test_client.hpp"
#include "pg_test_database.hpp"
#include "service_process.hpp"
#include "test_env.hpp"

namespace charge_outbox::testing {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;

constexpr const char* kMerchant = "00000000-0000-4000-8000-0000000000e8";
constexpr const char* kApiKey = "sk_test_clock_skew";
constexpr const char* kAcquirerKey = "ak_test_clock_skew";
constexpr const char* kLibFaketime = "/usr/lib/x86_64-linux-gnu/faketime/libfaketimeMT.so.1";

TEST(ClockSkewE2E, AChargeApiWhoseClockRunsAheadRecordsTheDatabasesTime) {
  ASSERT_TRUE(fs::exists(kLibFaketime)) << "deploy/local/install-deps installs faketime";
  const auto db = PgTestDatabase::Create("clock_skew", PgTestDatabase::Schema::kMigrated);
  InsertMerchant(*db, kMerchant, kApiKey);
  const auto dir = fs::temp_directory_path() / UniqueName("clock_skew_e2e");
  const int sim_port = FreeLoopbackPort();
  ServiceProcess sim({ACQUIRER_SIM_BIN}, EnvChanges{{"HTTP_PORT", std::to_string(sim_port)},
                                                    {"DATA_DIR", (dir / "sim").string()},
                                                    {"AUTH_API_KEYS", kAcquirerKey}});
  auto env = FastChargeApiEnv(db->url(), sim_port, kAcquirerKey);
  env["LD_PRELOAD"] = kLibFaketime;
  env["FAKETIME"] = "+7m";
  env["FAKETIME_DONT_FAKE_MONOTONIC"] = "1";
  ServiceProcess api({CHARGE_API_BIN}, env);

  HttpTestClient client(api.port(), "127.0.0.1", 30s);
  const auto r = client.Post(
      "/v1/charges", R"({"amount": 1000, "currency": "BRL", "order_id": "PED-1", "payment_method": "pm_tok_visa"})",
      {{"Authorization", std::string("Bearer ") + kApiKey}, {"Content-Type", "application/json"},
       {"Idempotency-Key", "skewed"}});
  ASSERT_EQ(r.status(), 201u) << r.response.body() << api.Output();

  // Within a minute of the database's clock (the whole test takes seconds); the host says 7 minutes later.
  const auto near_now = [&](const std::string& times) {
    return db->Scalar("SELECT bool_and(abs(extract(epoch FROM t - now())) < 60) FROM (" + times + ") AS x(t)");
  };
  EXPECT_EQ(near_now("SELECT started_at FROM acquirer_attempts UNION ALL SELECT finished_at FROM acquirer_attempts"),
            "t");
  EXPECT_EQ(near_now("SELECT updated_at FROM charges"), "t");
  EXPECT_EQ(near_now("SELECT created_at FROM outbox"), "t");
  // The answer carries the time the database wrote, the same GET shows and the event announces.
  EXPECT_EQ(std::string(r.json().at("updated_at").as_string()), db->Scalar("SELECT rfc3339(updated_at) FROM charges"));
  EXPECT_EQ(db->Scalar("SELECT payload->>'updated_at' FROM outbox WHERE sequence = 2"),
            db->Scalar("SELECT rfc3339(updated_at) FROM charges"));
  fs::remove_all(dir);
}

}  // namespace
}  // namespace charge_outbox::testing
