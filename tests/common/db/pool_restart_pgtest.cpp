// The pool across a PostgreSQL restart, on a server of the test's own (OwnPostgres; never the shared one):
// a pool full of connections, the server restarted (fast, then immediate shutdown), and every job that
// starts once the server accepts connections again succeeds, each write applied once. On the pool before
// issue 45 each of its idle connections failed the first job that drew it: the connections had died with
// the old server. Also: a job in flight when the server goes down fails as lost and is not run again.
#include <gtest/gtest.h>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/use_future.hpp>
#include <pqxx/pqxx>

#include <atomic>
#include <future>
#include <iostream>
#include <memory>
#include <set>
#include <string>
#include <thread>

#include "db/pg_pool.hpp"
#include "db/statement.hpp"
#include "own_postgres.hpp"
#include "service_process.hpp"

namespace charge_outbox::db {
namespace {

namespace asio = boost::asio;
using testing::OwnPostgres;
using namespace std::chrono_literals;

constexpr Statement kInsert{"restart_test_insert", "INSERT INTO restart_writes (n) VALUES ($1::int)"};
constexpr int kConnections = 8;
constexpr int kJobsAfter = 40;

class PgPoolRestartTest : public ::testing::TestWithParam<OwnPostgres::Shutdown> {
 protected:
  static void SetUpTestSuite() {
    server_ = new OwnPostgres(PROJECT_ROOT, "pool_restart");
    pqxx::connection conn(server_->url());
    pqxx::nontransaction tx(conn);
    tx.exec("CREATE TABLE restart_writes (n int PRIMARY KEY)");
  }
  static void TearDownTestSuite() {
    delete server_;
    server_ = nullptr;
  }

  static int Count(const std::string& where) {
    pqxx::connection conn(server_->url());
    pqxx::nontransaction tx(conn);
    return tx.exec("SELECT count(*)::int FROM restart_writes WHERE " + where)[0][0].as<int>();
  }

  // One write of n; a failure is counted. A coroutine function, not a lambda with captures by value (GCC 12).
  static asio::awaitable<void> Write(PgPool& pool, std::atomic<int>& failed, int n) {
    try {
      co_await pool.Run([n](PgConnection& c) -> asio::awaitable<void> { co_await c.Execute(kInsert, n); });
    } catch (const std::exception& e) {
      ++failed;
      std::cerr << "write " << n << " failed: " << e.what() << "\n";
    }
  }

  // `jobs` writes (n = first, first + 1, ...), all started at once on two threads; returns how many failed.
  static int Writes(PgPool& pool, int first, int jobs) {
    asio::io_context io;
    std::atomic<int> failed{0};
    for (int i = 0; i < jobs; ++i) asio::co_spawn(io, Write(pool, failed, first + i), asio::detached);
    std::thread second([&] { io.run(); });
    io.run();
    second.join();
    return failed;
  }

  static OwnPostgres* server_;
};
OwnPostgres* PgPoolRestartTest::server_ = nullptr;

TEST_P(PgPoolRestartTest, EveryJobAfterTheServerIsBackSucceedsAndWritesOnce) {
  const bool fast = GetParam() == OwnPostgres::Shutdown::kFast;
  const int base = fast ? 0 : 100000;
  ConnectionSettings settings;
  settings.call_timeout = 5s;
  PgPool pool(server_->url(), {.connections = kConnections, .application_name = "restart-test", .connection = settings});
  // Fill the pool: as many jobs at once as it has connections, each holding one for a moment.
  {
    asio::io_context io;
    std::set<int> backends;
    for (int i = 0; i < kConnections; ++i) {
      asio::co_spawn(io, [&]() -> asio::awaitable<void> {
        const int pid = co_await pool.Run([](PgConnection& c) -> asio::awaitable<int> {
          co_await c.ExecuteText("SELECT pg_sleep(0.2)");
          co_return c.backend_pid();
        });
        backends.insert(pid);
      }, asio::detached);
    }
    io.run();
    ASSERT_EQ(backends.size(), static_cast<std::size_t>(kConnections));
  }
  ASSERT_EQ(Writes(pool, base, kConnections), 0);

  server_->Restart(GetParam());  // returns once the new server accepts connections

  const int failed = Writes(pool, base + 1000, kJobsAfter);
  std::cout << "[ figures  ] " << (fast ? "fast" : "immediate") << " restart: " << failed << " of " << kJobsAfter
            << " jobs failed after the server was back; " << pool.replaced() << " connections replaced\n";
  EXPECT_EQ(failed, 0) << "a job after the restart met a connection that died with the old server";
  EXPECT_EQ(pool.replaced(), static_cast<std::uint64_t>(kConnections)) << "each dead idle connection, once";
  // Each write applied exactly once (the primary key would refuse a second; none is missing).
  EXPECT_EQ(Count("n >= " + std::to_string(base + 1000) + " AND n < " + std::to_string(base + 1000 + kJobsAfter)),
            kJobsAfter);
}

INSTANTIATE_TEST_SUITE_P(Shutdowns, PgPoolRestartTest,
                         ::testing::Values(OwnPostgres::Shutdown::kFast, OwnPostgres::Shutdown::kImmediate),
                         [](const ::testing::TestParamInfo<OwnPostgres::Shutdown>& shutdown) {
                           return std::string(shutdown.param == OwnPostgres::Shutdown::kFast ? "Fast" : "Immediate");
                         });

// A write on the wire when the server goes down may have run: it fails (the caller's honest answer is
// "unknown", not "nothing happened") and the pool does not send it a second time.
TEST(PgPoolInFlightTest, AWriteInFlightDuringTheShutdownFailsAndIsNotRunAgain) {
  OwnPostgres server(PROJECT_ROOT, "pool_in_flight");
  ConnectionSettings settings;
  settings.statement_timeout = 0ms;  // the statement runs until the shutdown ends it
  settings.call_timeout = 60s;
  PgPool pool(server.url(), {.connections = 2, .application_name = "in-flight-test", .connection = settings});
  std::atomic<int> calls{0};
  auto job = std::async(std::launch::async, [&] {
    asio::io_context io;
    auto done = asio::co_spawn(io, [&]() -> asio::awaitable<void> {
      co_await pool.Run([&](PgConnection& c) -> asio::awaitable<void> {
        ++calls;
        co_await c.ExecuteText("CREATE TABLE IF NOT EXISTS in_flight AS SELECT 1 AS n FROM pg_sleep(30)");
      });
    }, asio::use_future);
    io.run();
    done.get();
  });
  // The statement is running on the server before the shutdown begins.
  ASSERT_TRUE(testing::Eventually([&] {
    pqxx::connection conn(server.url());
    pqxx::nontransaction tx(conn);
    return tx.exec("SELECT count(*) FROM pg_stat_activity WHERE application_name = 'in-flight-test' "
                   "AND state = 'active'")[0][0]
               .as<int>() == 1;
  }, 10s));
  server.Restart(OwnPostgres::Shutdown::kFast);
  EXPECT_THROW(job.get(), pqxx::broken_connection);
  EXPECT_EQ(calls, 1) << "a statement that may have run was sent again";
  EXPECT_EQ(pool.replaced(), 1u);
}

}  // namespace
}  // namespace charge_outbox::db
