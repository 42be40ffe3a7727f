// Issue 14, defect 4: charge-api when its database hangs instead of failing. A FaultProxy of the test's
// own between charge-api and PostgreSQL black-holes the traffic (connections stay open, nothing answers).
// Every database call has a deadline (database.call_timeout, connect_timeout for a new connection), so a
// charge hears 503 with Retry-After in seconds rather than holding a pool worker, and its client, for
// the minutes TCP would wait; once the network heals charges go through again. charge-api and
// acquirer-sim run as processes on a real PostgreSQL.
#include <gtest/gtest.h>

#include <boost/beast/http/field.hpp>

#include <filesystem>
#include <future>
#include <vector>

#include "charge_stack.hpp"
#include "fault_proxy.hpp"
#include "http_test_client.hpp"
#include "pg_test_database.hpp"
#include "service_process.hpp"
#include "test_env.hpp"

namespace charge_outbox::testing {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

constexpr const char* kMerchant = "00000000-0000-4000-8000-0000000000d4";
constexpr const char* kApiKey = "sk_test_hung_database";
constexpr const char* kAcquirerKey = "ak_test_hung_database";

HttpResult PostCharge(std::uint16_t port, const std::string& key) {
  HttpTestClient client(port, "127.0.0.1", 60s);
  return client.Post("/v1/charges",
                     R"({"amount": 1000, "currency": "BRL", "order_id": "PED-1", "payment_method": "pm_tok_visa"})",
                     {{"Authorization", std::string("Bearer ") + kApiKey},
                      {"Content-Type", "application/json"},
                      {"Idempotency-Key", key}});
}

TEST(HungDatabaseE2E, ChargesHear503WithinTheDeadlineWhileTheDatabaseIsBlackHoledAndPassOnceItHeals) {
  const auto db = PgTestDatabase::Create("hung_database", PgTestDatabase::Schema::kMigrated);
  InsertMerchant(*db, kMerchant, kApiKey);
  const auto dir = fs::temp_directory_path() / UniqueName("hung_database_e2e");
  const int sim_port = FreeLoopbackPort();
  ServiceProcess sim({ACQUIRER_SIM_BIN}, EnvChanges{{"HTTP_PORT", std::to_string(sim_port)},
                                                    {"DATA_DIR", (dir / "sim").string()},
                                                    {"AUTH_API_KEYS", kAcquirerKey}});
  FaultProxy proxy(UriEndpoint(db->url()).host, UriEndpoint(db->url()).port);
  auto env = FastChargeApiEnv(WithEndpoint(db->url(), {"127.0.0.1", proxy.port()}), sim_port, kAcquirerKey);
  env["DATABASE_POOL_SIZE"] = "2";
  env["DATABASE_CONNECT_TIMEOUT"] = "2s";
  env["DATABASE_STATEMENT_TIMEOUT"] = "1s";
  env["DATABASE_CALL_TIMEOUT"] = "2s";
  ServiceProcess api({CHARGE_API_BIN}, env);

  const auto warm = PostCharge(api.port(), "hung-warm");
  ASSERT_TRUE(warm.ok()) << api.Output();
  ASSERT_EQ(warm.status(), 201u) << warm.response.body();

  proxy.BlackHole();
  // More charges at once than the pool has connections: the ones queued behind the hung calls have the
  // same deadline, counted from when they asked.
  const auto started = Clock::now();
  std::vector<std::future<std::pair<HttpResult, Clock::duration>>> charges;
  for (int i = 0; i < 6; ++i) {
    charges.push_back(std::async(std::launch::async, [&, i] {
      auto r = PostCharge(api.port(), "hung-" + std::to_string(i));
      return std::make_pair(std::move(r), Clock::now() - started);
    }));
  }
  Clock::duration slowest{};
  for (auto& f : charges) {
    auto [r, took] = f.get();
    ASSERT_TRUE(r.ok()) << "no answer: " << api.Output();
    EXPECT_EQ(r.status(), 503u) << r.response.body();
    EXPECT_FALSE(r.response[boost::beast::http::field::retry_after].empty());
    slowest = std::max(slowest, took);
  }
  std::printf("database black-holed: slowest of 6 charges answered 503 after %.1f s (call_timeout 2 s, connect_timeout 2 s)\n",
              std::chrono::duration<double>(slowest).count());
  // call_timeout, plus one connect_timeout for a job that must open a new connection, with room.
  EXPECT_LT(slowest, 8s);

  proxy.Pass();
  const auto healed = Clock::now();
  HttpResult after;
  ASSERT_TRUE(Eventually(
      [&] {
        after = PostCharge(api.port(), "hung-after");
        return after.ok() && after.status() == 201u;
      },
      20s))
      << after.response.body() << api.Output();
  std::printf("healed: a charge passes again after %.1f s\n",
              std::chrono::duration<double>(Clock::now() - healed).count());
  fs::remove_all(dir);
}

// Issue 41, defect 1, as a new user saw it: a charge is captured (201), then the database stops
// answering. A replay of its key, a GET of it and a POST under a new key all get 503, and none of them
// says "nothing was charged": the money was taken, and a client that believed it and started over under a
// new key would pay twice. Each keeps the client on its key (or GET). Before the fix all three said
// "Nothing was charged. Retry with the same Idempotency-Key."
TEST(HungDatabaseE2E, While503ForADatabaseOutageNoAnswerSaysNothingWasCharged) {
  const auto db = PgTestDatabase::Create("outage_words", PgTestDatabase::Schema::kMigrated);
  InsertMerchant(*db, kMerchant, kApiKey);
  const auto dir = fs::temp_directory_path() / UniqueName("outage_words_e2e");
  const int sim_port = FreeLoopbackPort();
  ServiceProcess sim({ACQUIRER_SIM_BIN}, EnvChanges{{"HTTP_PORT", std::to_string(sim_port)},
                                                    {"DATA_DIR", (dir / "sim").string()},
                                                    {"AUTH_API_KEYS", kAcquirerKey}});
  FaultProxy proxy(UriEndpoint(db->url()).host, UriEndpoint(db->url()).port);
  auto env = FastChargeApiEnv(WithEndpoint(db->url(), {"127.0.0.1", proxy.port()}), sim_port, kAcquirerKey);
  env["DATABASE_CONNECT_TIMEOUT"] = "2s";
  env["DATABASE_STATEMENT_TIMEOUT"] = "1s";
  env["DATABASE_CALL_TIMEOUT"] = "2s";
  ServiceProcess api({CHARGE_API_BIN}, env);
  const auto captured = PostCharge(api.port(), "outage-paid");
  ASSERT_EQ(captured.status(), 201u) << captured.response.body();
  const std::string id(captured.json().at("id").as_string());

  proxy.BlackHole();
  HttpTestClient client(api.port(), "127.0.0.1", 60s);
  const auto get = client.Get("/v1/charges/" + id, {{"Authorization", std::string("Bearer ") + kApiKey}});
  for (const auto& [what, r] : {std::pair{"a replay of the captured charge's key", PostCharge(api.port(), "outage-paid")},
                                std::pair{"a GET of the captured charge", get},
                                std::pair{"a POST under a new key", PostCharge(api.port(), "outage-new")}}) {
    ASSERT_EQ(r.status(), 503u) << what << ": " << r.response.body();
    const auto problem = r.json().as_object();
    const std::string detail(problem.at("detail").as_string());
    EXPECT_EQ(detail.find("othing was charged"), std::string::npos) << what << ": " << detail;
    EXPECT_NE(detail.find("says nothing about the charge"), std::string::npos) << what << ": " << detail;
    EXPECT_NE(detail.find("same key"), std::string::npos) << what << ": " << detail;
  }
  proxy.Pass();
  fs::remove_all(dir);
}

}  // namespace
}  // namespace charge_outbox::testing
