// charge-api across a PostgreSQL restart (issue 45): the real binary, its pools filled by concurrent
// charges, the server restarted under it (fast shutdown, then immediate), and every request that arrives
// once the server accepts connections again is answered as if nothing happened: 201, never a 503 from a
// pooled connection that died with the old server. On a server of the test's own (OwnPostgres), never the
// shared one. Before issue 45 the first request to draw each dead connection was answered 503.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <pqxx/pqxx>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <iostream>
#include <map>
#include <memory>
#include <mutex>
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
using namespace std::chrono_literals;
using ::testing::HasSubstr;

constexpr const char* kMerchant = "00000000-0000-4000-8000-0000000045aa";
constexpr const char* kApiKey = "sk_test_pg_restart";
constexpr const char* kAcquirerKey = "ak_test_pg_restart";
constexpr int kPoolSize = 4;

std::string ChargeBody() {
  return R"({"amount": 1500, "currency": "BRL", "order_id": "PED-45", "payment_method": "pm_tok_visa"})";
}

class ChargeApiPgRestartE2E : public ::testing::TestWithParam<OwnPostgres::Shutdown> {
 protected:
  void SetUp() override {
    server_ = std::make_unique<OwnPostgres>(PROJECT_ROOT, "charge_api_pg_restart");
    const auto migrated = RunProcess({CHARGE_MIGRATE_BIN, "up"}, {{"DATABASE_URL", server_->url()}}, 120s);
    ASSERT_EQ(migrated.exit_code, 0) << migrated.out << migrated.err;
    {
      pqxx::connection conn(server_->url());
      pqxx::nontransaction tx(conn);
      tx.exec_params("INSERT INTO merchants (id, name) VALUES ($1::uuid, 'pg restart')", kMerchant);
      tx.exec_params("INSERT INTO api_keys (key_hash, merchant_id, key_prefix) "
                     "VALUES (sha256(convert_to($1, 'UTF8')), $2::uuid, 'sk_test')",
                     kApiKey, kMerchant);
    }
    dir_ = fs::temp_directory_path() / UniqueName("pg_restart_e2e");
    sim_ = std::make_unique<ServiceProcess>(std::vector<std::string>{ACQUIRER_SIM_BIN},
                                            EnvChanges{{"HTTP_PORT", "0"},
                                                       {"DATA_DIR", (dir_ / "sim").string()},
                                                       {"AUTH_API_KEYS", kAcquirerKey}});
    auto env = FastChargeApiEnv(server_->url(), sim_->port(), kAcquirerKey);
    env["DATABASE_POOL_SIZE"] = std::to_string(kPoolSize);
    api_ = std::make_unique<ServiceProcess>(std::vector<std::string>{CHARGE_API_BIN}, env);
    ASSERT_TRUE(Eventually([&] { return HttpTestClient(api_->admin_port()).Get("/readyz").status() == 200; }))
        << api_->Output();
  }

  void TearDown() override {
    api_.reset();
    sim_.reset();
    server_.reset();
    fs::remove_all(dir_);
  }

  // `threads` clients at once, each posting `each` new charges one after another; the statuses by count.
  std::map<unsigned, int> PostCharges(const std::string& prefix, int threads, int each) {
    std::mutex mutex;
    std::map<unsigned, int> statuses;
    std::vector<std::thread> clients;
    for (int t = 0; t < threads; ++t) {
      clients.emplace_back([&, t] {
        HttpTestClient client(api_->port(), "127.0.0.1", 30s);
        for (int i = 0; i < each; ++i) {
          const auto r = client.Post("/v1/charges", ChargeBody(),
                                     {{"Authorization", std::string("Bearer ") + kApiKey},
                                      {"Content-Type", "application/json"},
                                      {"Idempotency-Key", prefix + "-" + std::to_string(t) + "-" + std::to_string(i)}});
          std::lock_guard lock(mutex);
          ++statuses[r.ok() ? r.status() : 0u];
          if (r.ok() && r.status() != 201) std::cerr << "answered " << r.status() << ": " << r.response.body() << "\n";
        }
      });
    }
    for (auto& c : clients) c.join();
    return statuses;
  }

  std::unique_ptr<OwnPostgres> server_;
  fs::path dir_;
  std::unique_ptr<ServiceProcess> sim_;
  std::unique_ptr<ServiceProcess> api_;
};

TEST_P(ChargeApiPgRestartE2E, NoRequestAfterTheServerIsBackIsAnswered503) {
  const bool fast = GetParam() == OwnPostgres::Shutdown::kFast;
  // Every connection of the charge pool in use at once, and the key and readiness pools used too.
  const auto before = PostCharges("fill", 2 * kPoolSize, 2);
  ASSERT_EQ(before.at(201), 4 * kPoolSize) << api_->Output();

  server_->Restart(GetParam());  // returns once the new server accepts connections

  constexpr int kThreads = 6, kEach = 5;
  const auto after = PostCharges("after", kThreads, kEach);
  const int created = after.contains(201) ? after.at(201) : 0;
  const int unavailable = after.contains(503) ? after.at(503) : 0;
  std::cout << "[ figures  ] " << (fast ? "fast" : "immediate") << " restart: " << created << " of "
            << kThreads * kEach << " charges after the server was back answered 201, " << unavailable << " 503\n";
  EXPECT_EQ(unavailable, 0) << api_->Output();
  EXPECT_EQ(created, kThreads * kEach) << api_->Output();
  EXPECT_EQ(HttpTestClient(api_->admin_port()).Get("/readyz").status(), 200u);
  // Each dead connection was logged when it was replaced, with the server's reason and no URL.
  EXPECT_THAT(api_->Output(), HasSubstr("closed and replaced: 57P01"));
  EXPECT_THAT(api_->Output(), ::testing::Not(HasSubstr("postgresql://")));
  // ... and counted: at least the charge pool's connections that the requests drew, at most every pool's.
  const std::string metrics = HttpTestClient(api_->admin_port()).Get("/metrics").response.body();
  const std::string name = "\ncharge_api_database_connections_replaced_total ";
  const auto at = metrics.find(name);
  ASSERT_NE(at, std::string::npos) << metrics;
  const double replaced = std::stod(metrics.substr(at + name.size()));
  EXPECT_GE(replaced, 1.0);
  EXPECT_LE(replaced, kPoolSize + 2 + 1) << "charge pool, key pool (auth.pool_size 2), readiness pool (1)";
  pqxx::connection conn(server_->url());
  pqxx::nontransaction tx(conn);
  EXPECT_EQ(tx.exec("SELECT count(*)::int FROM charges WHERE idempotency_key LIKE 'after-%'")[0][0].as<int>(),
            kThreads * kEach);
}

INSTANTIATE_TEST_SUITE_P(Shutdowns, ChargeApiPgRestartE2E,
                         ::testing::Values(OwnPostgres::Shutdown::kFast, OwnPostgres::Shutdown::kImmediate),
                         [](const ::testing::TestParamInfo<OwnPostgres::Shutdown>& shutdown) {
                           return std::string(shutdown.param == OwnPostgres::Shutdown::kFast ? "Fast" : "Immediate");
                         });

}  // namespace
}  // namespace charge_outbox::testing
