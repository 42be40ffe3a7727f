// PgPool against a real PostgreSQL: jobs run off the awaiting thread, failures come back as
// exceptions, a connection the server killed is replaced (with the statements declared on it again), a
// full queue refuses at once, the sessions carry the server-side timeouts, and a job on a black-holed
// connection fails within its deadline.
#include "db/pg_pool.hpp"

#include <gtest/gtest.h>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/use_future.hpp>

#include <libpq-fe.h>

#include <atomic>
#include <future>
#include <set>
#include <span>

#include "fault_proxy.hpp"
#include "pg_test_database.hpp"

namespace charge_outbox::db {
namespace {

namespace asio = boost::asio;
using testing::PgTestDatabase;

class PgPoolTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { db_ = PgTestDatabase::Create("pg_pool", PgTestDatabase::Schema::kEmpty).release(); }
  static void TearDownTestSuite() { delete db_; }

  // Runs `coroutine` to completion on a fresh io_context on this thread.
  template <typename T>
  static T RunCoroutine(asio::awaitable<T> coroutine) {
    asio::io_context io;
    auto future = asio::co_spawn(io, std::move(coroutine), asio::use_future);
    io.run();
    return future.get();
  }

  static PgTestDatabase* db_;
};
PgTestDatabase* PgPoolTest::db_ = nullptr;

TEST_F(PgPoolTest, AwaitedJobRunsOnAWorkerAndResumesOnTheCallersThread) {
  PgPool pool(db_->url(), {.connections = 2});
  const auto caller = std::this_thread::get_id();
  const auto [value, worker] = RunCoroutine([&]() -> asio::awaitable<std::pair<int, std::thread::id>> {
    auto r = co_await pool.Run([](pqxx::connection& c) {
      pqxx::nontransaction tx(c);
      return std::make_pair(tx.exec1("SELECT 40 + 2")[0].as<int>(), std::this_thread::get_id());
    });
    EXPECT_EQ(std::this_thread::get_id(), caller);
    co_return r;
  }());
  EXPECT_EQ(value, 42);
  EXPECT_NE(worker, caller);
}

// DATABASE_URL may be libpq's keyword/value form; the pool names its sessions without breaking it.
TEST_F(PgPoolTest, AKeywordValueUrlConnectsAndCarriesTheApplicationName) {
  PQconninfoOption* options = PQconninfoParse(db_->url().c_str(), nullptr);
  ASSERT_NE(options, nullptr);
  std::string keyword_value;
  for (auto* o = options; o->keyword != nullptr; ++o) {
    if (o->val != nullptr && *o->val != '\0') keyword_value += std::string(o->keyword) + "='" + o->val + "' ";
  }
  PQconninfoFree(options);
  PgPool pool(keyword_value, {.connections = 1, .application_name = "pool-test"});
  const auto name = RunCoroutine([&]() -> asio::awaitable<std::string> {
    co_return co_await pool.Run([](pqxx::connection& c) {
      pqxx::nontransaction tx(c);
      return tx.exec1("SELECT current_setting('application_name')")[0].as<std::string>();
    });
  }());
  EXPECT_EQ(name, "pool-test");
}

TEST_F(PgPoolTest, JobExceptionIsRethrownToTheAwaiter) {
  PgPool pool(db_->url(), {.connections = 1});
  EXPECT_THROW(RunCoroutine([&]() -> asio::awaitable<int> {
                 co_return co_await pool.Run([](pqxx::connection& c) {
                   pqxx::nontransaction tx(c);
                   return tx.exec1("SELECT no_such_column")[0].as<int>();
                 });
               }()),
               pqxx::undefined_column);
}

TEST_F(PgPoolTest, ConnectionsRunJobsInParallel) {
  PgPool pool(db_->url(), {.connections = 4});
  asio::io_context io;
  std::set<int> backends;
  std::mutex m;
  for (int i = 0; i < 4; ++i) {
    asio::co_spawn(io, [&]() -> asio::awaitable<void> {
      const int pid = co_await pool.Run([](pqxx::connection& c) {
        pqxx::nontransaction tx(c);
        tx.exec("SELECT pg_sleep(0.3)");
        return c.backendpid();
      });
      std::lock_guard lock(m);
      backends.insert(pid);
    }, asio::detached);
  }
  const auto started = std::chrono::steady_clock::now();
  io.run();
  EXPECT_EQ(backends.size(), 4u);
  EXPECT_LT(std::chrono::steady_clock::now() - started, std::chrono::milliseconds{1100});  // not 4 x 0.3 s serially
}

TEST_F(PgPoolTest, KilledConnectionIsReplacedForTheNextJob) {
  PgPool pool(db_->url(), {.connections = 1});
  const int first = pool.RunSync([](pqxx::connection& c) { return c.backendpid(); });
  db_->Execute("SELECT pg_terminate_backend(" + std::to_string(first) + ")");
  EXPECT_THROW(pool.RunSync([](pqxx::connection& c) {
                 pqxx::nontransaction tx(c);
                 tx.exec("SELECT 1");
               }),
               pqxx::broken_connection);
  const int second = pool.RunSync([](pqxx::connection& c) { return c.backendpid(); });
  EXPECT_NE(second, first);
}

TEST_F(PgPoolTest, StatementsAreDeclaredOncePerConnectionAndAgainOnAReplacement) {
  static constexpr Statement kStatements[] = {{"pool_test_double", "SELECT $1::int * 2"},
                                              {"pool_test_pid", "SELECT pg_backend_pid()"}};
  PgPool pool(db_->url(), {.connections = 1});
  // What the server has prepared on this session, and the answer of one of them.
  auto job = [](pqxx::connection& c) {
    pqxx::nontransaction tx(c);
    const int doubled = tx.exec_prepared1("pool_test_double", 21)[0].as<int>();
    const auto prepared = tx.exec1("SELECT count(*) FROM pg_prepared_statements")[0].as<int>();
    return std::pair{doubled, prepared};
  };
  const auto run = [&] {
    return RunCoroutine([&]() -> asio::awaitable<std::pair<int, int>> {
      co_return co_await pool.Run(std::span<const Statement>(kStatements), job);
    }());
  };
  EXPECT_EQ(run(), (std::pair{42, 1}));  // declared, and prepared on the server at its first use
  EXPECT_EQ(run(), (std::pair{42, 1}));
  const int first = RunCoroutine([&]() -> asio::awaitable<int> {
    co_return co_await pool.Run(std::span<const Statement>(kStatements), [](pqxx::connection& c) {
      pqxx::nontransaction tx(c);
      return tx.exec_prepared1("pool_test_pid")[0].as<int>();
    });
  }());
  db_->Execute("SELECT pg_terminate_backend(" + std::to_string(first) + ")");
  EXPECT_THROW(run(), pqxx::broken_connection);
  // The replacement connection knows none of them until the pool declares them on it again.
  EXPECT_EQ(run(), (std::pair{42, 1}));
}

TEST_F(PgPoolTest, UnreachableServerFailsTheJobWithBrokenConnection) {
  PgPool pool("postgresql://postgres@127.0.0.1:1/x?connect_timeout=2", {.connections = 1});
  EXPECT_THROW(pool.RunSync([](pqxx::connection&) { return 1; }), pqxx::broken_connection);
}

TEST_F(PgPoolTest, FullQueueRefusesAtOnce) {
  PgPool pool(db_->url(), {.connections = 1, .max_queued = 1});
  std::promise<void> release;
  auto released = release.get_future().share();
  std::atomic<bool> running{false};
  std::thread blocker([&] {
    pool.RunSync([&](pqxx::connection&) {
      running = true;
      released.wait();
    });
  });
  while (!running) std::this_thread::yield();
  std::thread queued([&] { pool.RunSync([](pqxx::connection&) {}); });
  while (pool.queued() < 1) std::this_thread::yield();
  EXPECT_THROW(pool.RunSync([](pqxx::connection&) {}), PoolOverloaded);
  release.set_value();
  blocker.join();
  queued.join();
}

// The settings reach the server: each session runs with the statement and idle-in-transaction timeouts
// and the keepalives of database.*, and a statement past statement_timeout is cancelled by the server.
TEST_F(PgPoolTest, SessionsCarryTheServerSideTimeouts) {
  ConnectionSettings settings;
  settings.statement_timeout = std::chrono::milliseconds{300};
  settings.call_timeout = std::chrono::seconds{5};
  PgPool pool(db_->url(), {.connections = 1, .connection = settings});
  const auto shown = pool.RunSync([](pqxx::connection& c) {
    pqxx::nontransaction tx(c);
    return tx.exec1("SELECT current_setting('statement_timeout') || ' ' ||"
                    " current_setting('idle_in_transaction_session_timeout')")[0]
        .as<std::string>();
  });
  EXPECT_EQ(shown, "300ms 10s");
  try {
    pool.RunSync([](pqxx::connection& c) {
      pqxx::nontransaction tx(c);
      tx.exec("SELECT pg_sleep(3)");
    });
    ADD_FAILURE() << "pg_sleep(3) outlived statement_timeout";
  } catch (const pqxx::sql_error& e) {
    EXPECT_EQ(e.sqlstate(), "57014");  // query_canceled: the server's answer, the connection still good
  }
  EXPECT_EQ(pool.RunSync([](pqxx::connection& c) { return pqxx::nontransaction(c).exec1("SELECT 1")[0].as<int>(); }),
            1);
}

// A server that accepted the connection and then answers nothing (the proxy black-holes it) costs one
// call_timeout, not the minutes TCP would wait; a job queued behind it fails within its own deadline plus
// one connect_timeout, and the pool works again once the network heals.
TEST_F(PgPoolTest, ABlackHoledJobFailsWithinItsDeadlineAndThePoolRecovers) {
  PQconninfoOption* parsed = PQconninfoParse(db_->url().c_str(), nullptr);
  std::string host;
  std::string port;
  std::string dbname;
  std::string user;
  for (auto* o = parsed; o->keyword != nullptr; ++o) {
    const std::string k = o->keyword;
    const std::string v = o->val != nullptr ? o->val : "";
    if (k == "host") host = v;
    if (k == "port") port = v;
    if (k == "dbname") dbname = v;
    if (k == "user") user = v;
  }
  PQconninfoFree(parsed);
  testing::FaultProxy proxy(host, static_cast<std::uint16_t>(std::stoi(port)));
  const std::string url = "host=127.0.0.1 port=" + std::to_string(proxy.port()) + " dbname=" + dbname +
                          (user.empty() ? "" : " user=" + user);
  ConnectionSettings settings;
  settings.statement_timeout = std::chrono::milliseconds{500};
  settings.call_timeout = std::chrono::seconds{1};
  settings.connect_timeout = std::chrono::seconds{2};
  PgPool pool(url, {.connections = 1, .connection = settings});
  auto select1 = [](pqxx::connection& c) { return pqxx::nontransaction(c).exec1("SELECT 1")[0].as<int>(); };
  ASSERT_EQ(pool.RunSync(select1), 1);

  proxy.BlackHole();
  const auto started = std::chrono::steady_clock::now();
  auto queued = std::async(std::launch::async, [&] {
    std::this_thread::sleep_for(std::chrono::milliseconds{100});
    return pool.RunSync(select1);
  });
  EXPECT_THROW(pool.RunSync(select1), pqxx::broken_connection);
  const auto first = std::chrono::steady_clock::now() - started;
  EXPECT_GE(first, std::chrono::milliseconds{900});
  EXPECT_LT(first, std::chrono::milliseconds{2500}) << "the hung job held its worker past call_timeout";
  // The queued job reached the worker just inside its deadline and must connect first: bounded by
  // connect_timeout (libpq's own), so a job waits at most call_timeout + connect_timeout.
  EXPECT_ANY_THROW(queued.get());
  EXPECT_LT(std::chrono::steady_clock::now() - started, std::chrono::milliseconds{4000});

  proxy.Pass();
  EXPECT_EQ(pool.RunSync(select1), 1);
}

}  // namespace
}  // namespace charge_outbox::db
