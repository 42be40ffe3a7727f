// PgPool and PgConnection against a real PostgreSQL: a job runs on the awaiting thread and its
// statements wait without blocking it (four jobs on one thread overlap), statements are prepared once per
// connection and again on a replacement, failures come back as libpqxx's exception types with their
// SQLSTATE, a connection the server killed or a job abandoned mid-statement is replaced, a full queue
// refuses at once, a closed pool refuses, the sessions carry the server-side timeouts, and a job on a
// black-holed connection fails within its deadline.
#include "db/pg_pool.hpp"

#include <gtest/gtest.h>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_future.hpp>
#include <libpq-fe.h>
#include <pqxx/pqxx>

#include <atomic>
#include <future>
#include <set>

#include "fault_proxy.hpp"
#include "pg_test_database.hpp"

namespace charge_outbox::db {
namespace {

namespace asio = boost::asio;
using testing::PgTestDatabase;

constexpr Statement kDouble{"pool_test_double", "SELECT $1::int * 2"};
constexpr Statement kPid{"pool_test_pid", "SELECT pg_backend_pid()"};

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

  // One text statement on the pool, its first value as an int.
  static int Select(PgPool& pool, std::string sql) {
    return RunCoroutine([&]() -> asio::awaitable<int> {
      co_return co_await pool.Run([&](PgConnection& c) -> asio::awaitable<int> {
        co_return (co_await c.ExecuteText(sql))[0][0].as<int>();
      });
    }());
  }

  static int BackendPid(PgPool& pool) {
    return RunCoroutine([&]() -> asio::awaitable<int> {
      co_return co_await pool.Run([](PgConnection& c) -> asio::awaitable<int> {
        co_return (co_await c.Execute(kPid))[0][0].as<int>();
      });
    }());
  }

  static PgTestDatabase* db_;
};
PgTestDatabase* PgPoolTest::db_ = nullptr;

TEST_F(PgPoolTest, AJobRunsOnTheAwaitingThread) {
  PgPool pool(db_->url(), {.connections = 2});
  const auto caller = std::this_thread::get_id();
  const auto [value, ran_on] = RunCoroutine([&]() -> asio::awaitable<std::pair<int, std::thread::id>> {
    auto r = co_await pool.Run([](PgConnection& c) -> asio::awaitable<std::pair<int, std::thread::id>> {
      const auto result = co_await c.Execute(kDouble, 21);
      co_return std::pair{result[0][0].as<int>(), std::this_thread::get_id()};
    });
    EXPECT_EQ(std::this_thread::get_id(), caller);
    co_return r;
  }());
  EXPECT_EQ(value, 42);
  EXPECT_EQ(ran_on, caller);
  pool.Close();
  EXPECT_THROW(Select(pool, "SELECT 1"), PoolOverloaded);
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
    co_return co_await pool.Run([](PgConnection& c) -> asio::awaitable<std::string> {
      co_return (co_await c.ExecuteText("SELECT current_setting('application_name')"))[0][0].as<std::string>();
    });
  }());
  EXPECT_EQ(name, "pool-test");
}

// The server's refusal comes back with its SQLSTATE, and the connection stays good for the next job.
TEST_F(PgPoolTest, AStatementErrorIsRethrownWithItsSqlstateAndTheConnectionStaysGood) {
  PgPool pool(db_->url(), {.connections = 1});
  const int before = BackendPid(pool);
  try {
    Select(pool, "SELECT no_such_column");
    ADD_FAILURE() << "no error";
  } catch (const pqxx::sql_error& e) {
    EXPECT_EQ(e.sqlstate(), "42703");
  }
  EXPECT_EQ(BackendPid(pool), before);
  EXPECT_EQ(Select(pool, "SELECT 7"), 7);
}

// Four jobs awaited on one thread overlap: each statement waits for the server without holding it.
TEST_F(PgPoolTest, JobsOnOneThreadWaitForTheServerTogether) {
  PgPool pool(db_->url(), {.connections = 4});
  asio::io_context io;
  std::set<int> backends;
  for (int i = 0; i < 4; ++i) {
    asio::co_spawn(io, [&]() -> asio::awaitable<void> {
      const int pid = co_await pool.Run([](PgConnection& c) -> asio::awaitable<int> {
        co_await c.ExecuteText("SELECT pg_sleep(0.3)");
        co_return c.backend_pid();
      });
      backends.insert(pid);
    }, asio::detached);
  }
  const auto started = std::chrono::steady_clock::now();
  io.run();
  EXPECT_EQ(backends.size(), 4u);
  EXPECT_LT(std::chrono::steady_clock::now() - started, std::chrono::milliseconds{1100});  // not 4 x 0.3 s serially
}

// Many jobs on two threads over two connections: every connection given back reaches a waiting job at
// once. A hand-off that came before the waiter's wait had started used to be missed: that job waited out
// database.call_timeout and then failed.
TEST_F(PgPoolTest, EveryHandOffReachesItsWaiterAcrossThreads) {
  ConnectionSettings settings;
  settings.call_timeout = std::chrono::seconds{3};
  PgPool pool(db_->url(), {.connections = 2, .max_queued = 1000, .connection = settings});
  constexpr int kRounds = 5, kJobs = 900;  // the race is narrow: many chances at it
  for (int round = 0; round < kRounds; ++round) {
    asio::io_context io;
    std::atomic<int> done{0};
    std::atomic<int> failed{0};
    for (int i = 0; i < kJobs; ++i) {
      asio::co_spawn(io, [&, i]() -> asio::awaitable<void> {
        try {
          const int doubled = co_await pool.Run([i](PgConnection& c) -> asio::awaitable<int> {
            co_return (co_await c.Execute(kDouble, i))[0][0].as<int>();
          });
          if (doubled == 2 * i) ++done;
        } catch (...) {
          ++failed;
        }
      }, asio::detached);
    }
    const auto started = std::chrono::steady_clock::now();
    std::thread second([&] { io.run(); });
    io.run();
    second.join();
    EXPECT_EQ(done, kJobs);
    EXPECT_EQ(failed, 0);
    EXPECT_LT(std::chrono::steady_clock::now() - started, settings.call_timeout) << "a waiter missed its hand-off";
  }
}

TEST_F(PgPoolTest, KilledConnectionIsReplacedForTheNextJob) {
  PgPool pool(db_->url(), {.connections = 1});
  const int first = BackendPid(pool);
  db_->Execute("SELECT pg_terminate_backend(" + std::to_string(first) + ")");
  EXPECT_THROW(Select(pool, "SELECT 1"), pqxx::broken_connection);
  EXPECT_NE(BackendPid(pool), first);
}

// A statement is prepared on a session at its first use there; a replacement session knows none of them,
// and gets them prepared again.
TEST_F(PgPoolTest, StatementsArePreparedOncePerConnectionAndAgainOnAReplacement) {
  PgPool pool(db_->url(), {.connections = 1});
  auto run = [&] {
    return RunCoroutine([&]() -> asio::awaitable<std::pair<int, int>> {
      co_return co_await pool.Run([](PgConnection& c) -> asio::awaitable<std::pair<int, int>> {
        const int doubled = (co_await c.Execute(kDouble, 21))[0][0].as<int>();
        const int prepared = (co_await c.ExecuteText("SELECT count(*)::int FROM pg_prepared_statements"))[0][0].as<int>();
        co_return std::pair{doubled, prepared};
      });
    }());
  };
  EXPECT_EQ(run(), (std::pair{42, 1}));
  EXPECT_EQ(run(), (std::pair{42, 1}));
  const int first = BackendPid(pool);  // prepares the second
  db_->Execute("SELECT pg_terminate_backend(" + std::to_string(first) + ")");
  EXPECT_THROW(run(), pqxx::broken_connection);
  EXPECT_EQ(run(), (std::pair{42, 1}));
}

// A job whose coroutine is destroyed while its statement is on the wire (its executor shut down) leaves an
// answer nobody read: that connection is closed, never lent again.
TEST_F(PgPoolTest, AJobAbandonedMidStatementClosesItsConnection) {
  PgPool pool(db_->url(), {.connections = 1});
  const int first = BackendPid(pool);
  {
    asio::io_context io;
    asio::co_spawn(io, [&]() -> asio::awaitable<void> {
      co_await pool.Run([](PgConnection& c) -> asio::awaitable<void> { co_await c.ExecuteText("SELECT pg_sleep(1)"); });
    }, asio::detached);
    io.run_for(std::chrono::milliseconds{200});
  }  // the suspended job is destroyed with its io_context
  EXPECT_NE(BackendPid(pool), first);
}

TEST_F(PgPoolTest, UnreachableServerFailsTheJobWithBrokenConnection) {
  PgPool pool("postgresql://postgres@127.0.0.1:1/x?connect_timeout=2", {.connections = 1});
  EXPECT_THROW(Select(pool, "SELECT 1"), pqxx::broken_connection);
}

TEST_F(PgPoolTest, FullQueueRefusesAtOnce) {
  PgPool pool(db_->url(), {.connections = 1, .max_queued = 1});
  asio::io_context io;
  std::atomic<int> finished{0};
  auto sleeper = [&]() -> asio::awaitable<void> {
    co_await pool.Run([](PgConnection& c) -> asio::awaitable<void> { co_await c.ExecuteText("SELECT pg_sleep(0.3)"); });
    ++finished;
  };
  asio::co_spawn(io, sleeper(), asio::detached);  // holds the one connection
  asio::co_spawn(io, sleeper(), asio::detached);  // waits for it
  std::optional<bool> refused;
  asio::co_spawn(io, [&]() -> asio::awaitable<void> {
    asio::steady_timer pause(io, std::chrono::milliseconds{100});
    co_await pause.async_wait(asio::use_awaitable);
    EXPECT_EQ(pool.queued(), 1u);
    try {
      co_await pool.Run([](PgConnection&) -> asio::awaitable<void> { co_return; });
      refused = false;
    } catch (const PoolOverloaded&) {
      refused = true;
    }
  }, asio::detached);
  io.run();
  EXPECT_EQ(refused, true);
  EXPECT_EQ(finished, 2);
}

// The settings reach the server: each session runs with the statement and idle-in-transaction timeouts
// and the keepalives of database.*, and a statement past statement_timeout is cancelled by the server.
TEST_F(PgPoolTest, SessionsCarryTheServerSideTimeouts) {
  ConnectionSettings settings;
  settings.statement_timeout = std::chrono::milliseconds{300};
  settings.call_timeout = std::chrono::seconds{5};
  PgPool pool(db_->url(), {.connections = 1, .connection = settings});
  const auto shown = RunCoroutine([&]() -> asio::awaitable<std::string> {
    co_return co_await pool.Run([](PgConnection& c) -> asio::awaitable<std::string> {
      const auto r = co_await c.ExecuteText(
          "SELECT current_setting('statement_timeout') || ' ' || current_setting('idle_in_transaction_session_timeout')");
      co_return r[0][0].as<std::string>();
    });
  }());
  EXPECT_EQ(shown, "300ms 10s");
  try {
    Select(pool, "SELECT 1 FROM pg_sleep(3)");
    ADD_FAILURE() << "pg_sleep(3) outlived statement_timeout";
  } catch (const pqxx::sql_error& e) {
    EXPECT_EQ(e.sqlstate(), "57014");  // query_canceled: the server's answer, the connection still good
  }
  EXPECT_EQ(Select(pool, "SELECT 1"), 1);
}

// A server that accepted the connection and then answers nothing (the proxy black-holes it) costs one
// call_timeout, not the minutes TCP would wait; a job waiting behind it fails within its own deadline plus
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
  ASSERT_EQ(Select(pool, "SELECT 1"), 1);

  proxy.BlackHole();
  const auto started = std::chrono::steady_clock::now();
  auto queued = std::async(std::launch::async, [&] {
    std::this_thread::sleep_for(std::chrono::milliseconds{100});
    return Select(pool, "SELECT 1");
  });
  EXPECT_THROW(Select(pool, "SELECT 1"), pqxx::broken_connection);
  const auto first = std::chrono::steady_clock::now() - started;
  EXPECT_GE(first, std::chrono::milliseconds{900});
  EXPECT_LT(first, std::chrono::milliseconds{2500}) << "the hung job held its connection past call_timeout";
  // The waiting job got the dropped connection's place just inside its deadline and must connect first:
  // bounded by connect_timeout (libpq's own), so a job waits at most call_timeout + connect_timeout.
  EXPECT_ANY_THROW(queued.get());
  EXPECT_LT(std::chrono::steady_clock::now() - started, std::chrono::milliseconds{4000});

  proxy.Pass();
  EXPECT_EQ(Select(pool, "SELECT 1"), 1);
}

}  // namespace
}  // namespace charge_outbox::db
