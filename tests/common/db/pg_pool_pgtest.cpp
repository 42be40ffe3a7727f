// PgPool and PgConnection against a real PostgreSQL: a job runs on the awaiting thread and its
// statements wait without blocking it (four jobs on one thread overlap), statements are prepared once per
// connection and again on a replacement, failures come back as libpqxx's exception types with their
// SQLSTATE, a connection the server killed is replaced before a job draws it, a job runs again on a fresh
// connection only as the repeat rule allows (never a commit in doubt), a connection to a read-only server
// is replaced, a job abandoned mid-statement closes its connection, a full queue
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
#include <optional>
#include <set>
#include <string>

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

// Ends an idle session of the pool and waits until its backend has exited (its FATAL and its close are
// on the client's socket by then).
void Terminate(const PgTestDatabase& db, int pid) {
  ASSERT_EQ(db.Scalar("SELECT pg_terminate_backend(" + std::to_string(pid) + ", 10000)"), "t");
}

// An idle connection whose session the server ended is found dead before it is lent (no round trip): the
// next job runs on a fresh one and succeeds. Before issue 45 that job failed with broken_connection.
TEST_F(PgPoolTest, KilledConnectionIsReplacedBeforeTheNextJob) {
  PgPool pool(db_->url(), {.connections = 1});
  const int first = BackendPid(pool);
  Terminate(*db_, first);
  EXPECT_EQ(Select(pool, "SELECT 1"), 1);
  EXPECT_EQ(pool.replaced(), 1u);
  EXPECT_NE(BackendPid(pool), first);
  EXPECT_EQ(pool.replaced(), 1u) << "a healthy connection is not replaced";
}

// The repeat rule against a real server (db/repeat_rule.hpp): a job whose connection dies with its
// statement sent runs once unless its caller marked it idempotent.
TEST_F(PgPoolTest, AJobLostWithItsStatementSentRunsAgainOnlyWhenIdempotent) {
  PgPool pool(db_->url(), {.connections = 1});
  int calls = 0;
  auto kill_first = [&](PgConnection& c) -> asio::awaitable<int> {
    // The first run's own session is ended under its statement: sent, its outcome unknown to the client.
    const std::string sql = calls++ == 0 ? "SELECT pg_terminate_backend(pg_backend_pid())::int" : "SELECT 7";
    co_return (co_await c.ExecuteText(sql))[0][0].as<int>();
  };
  EXPECT_THROW(RunCoroutine(pool.Run(kill_first)), pqxx::broken_connection);
  EXPECT_EQ(calls, 1);
  calls = 0;
  EXPECT_EQ(RunCoroutine(pool.Run(kill_first, Repeat::kIdempotent)), 7);
  EXPECT_EQ(calls, 2);
  EXPECT_EQ(pool.replaced(), 2u);
}

// A COMMIT whose connection dies under it is never sent again, even by a job marked idempotent: the job
// says "in doubt" (as the charge store does), and that is the caller's answer. A deferred trigger ends
// the session at COMMIT.
TEST_F(PgPoolTest, ACommitInDoubtIsNeverRunAgain) {
  db_->Execute("CREATE TABLE IF NOT EXISTS doubt (n int)");
  db_->Execute("CREATE OR REPLACE FUNCTION doubt_die() RETURNS trigger LANGUAGE plpgsql AS "
               "$$ BEGIN PERFORM pg_terminate_backend(pg_backend_pid()); PERFORM pg_sleep(1); RETURN NULL; END $$");
  db_->Execute("DROP TRIGGER IF EXISTS doubt_die ON doubt");
  db_->Execute("CREATE CONSTRAINT TRIGGER doubt_die AFTER INSERT ON doubt DEFERRABLE INITIALLY DEFERRED "
               "FOR EACH ROW EXECUTE FUNCTION doubt_die()");
  PgPool pool(db_->url(), {.connections = 1});
  for (const Repeat repeat : {Repeat::kIfNotSent, Repeat::kIdempotent}) {
    int calls = 0;
    auto commit = [&](PgConnection& c) -> asio::awaitable<void> {
      ++calls;
      co_await c.ExecuteText("BEGIN");
      co_await c.ExecuteText("INSERT INTO doubt VALUES (1)");
      std::optional<std::string> lost;
      try {
        co_await c.ExecuteText("COMMIT");
      } catch (const pqxx::broken_connection& e) {
        lost = e.what();
      }
      if (lost) throw pqxx::in_doubt_error("connection lost during COMMIT: " + *lost);
    };
    EXPECT_THROW(RunCoroutine(pool.Run(commit, repeat)), pqxx::in_doubt_error);
    EXPECT_EQ(calls, 1) << "a commit in doubt was sent again";
  }
  EXPECT_EQ(db_->Scalar("SELECT count(*) FROM doubt"), "0");  // the trigger's session died before committing
}

// A server that says it is read-only (here: default_transaction_read_only on the database, reported to
// every session as a hot standby's in_hot_standby is) refuses a write with 25006: the connection is
// closed and the job runs again on a fresh one; while every fresh one is read-only too, the job fails as
// unavailable (broken_connection), not as a refused statement. A write inside a READ ONLY transaction on
// a writable server stays the job's own error.
TEST_F(PgPoolTest, AConnectionToAReadOnlyServerIsReplacedAndTheWriteRunsOnTheNext) {
  db_->Execute("CREATE TABLE IF NOT EXISTS standby_writes (n int)");
  PgPool pool(db_->url(), {.connections = 1});
  int calls = 0;
  auto write = [&](PgConnection& c) -> asio::awaitable<void> {
    ++calls;
    co_await c.ExecuteText("INSERT INTO standby_writes VALUES (1)");
  };
  struct Writable {  // the database is writable again for the next test, whatever happens here
    const PgTestDatabase& db;
    ~Writable() { db.ExecuteAsAdmin("ALTER DATABASE " + db.name() + " RESET default_transaction_read_only"); }
  } writable{*db_};
  db_->ExecuteAsAdmin("ALTER DATABASE " + db_->name() + " SET default_transaction_read_only = on");
  EXPECT_GT(BackendPid(pool), 0);  // the pool's one connection, opened read-only
  EXPECT_THROW(RunCoroutine(pool.Run(write)), pqxx::broken_connection);
  EXPECT_EQ(calls, 2);
  EXPECT_EQ(pool.replaced(), 1u);
  // The "failover" ends: fresh sessions are writable; the pooled one still is not, and is replaced.
  db_->ExecuteAsAdmin("ALTER DATABASE " + db_->name() + " RESET default_transaction_read_only");
  calls = 0;
  RunCoroutine(pool.Run(write));
  EXPECT_EQ(calls, 2);
  EXPECT_EQ(pool.replaced(), 2u);
  EXPECT_EQ(db_->Scalar("SELECT count(*) FROM standby_writes"), "1");
  // Our own READ ONLY transaction refusing a write is not the server's state: one run, the SQLSTATE kept.
  calls = 0;
  auto read_only_write = [&](PgConnection& c) -> asio::awaitable<void> {
    ++calls;
    co_await c.ExecuteText("BEGIN READ ONLY");
    co_await c.ExecuteText("INSERT INTO standby_writes VALUES (2)");
  };
  try {
    RunCoroutine(pool.Run(read_only_write, Repeat::kIdempotent));
    ADD_FAILURE() << "the write was taken";
  } catch (const pqxx::sql_error& e) {
    EXPECT_EQ(e.sqlstate(), "25006");
  }
  EXPECT_EQ(calls, 1);
  EXPECT_EQ(pool.replaced(), 2u);
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
  Terminate(*db_, first);
  EXPECT_EQ(run(), (std::pair{42, 1}));  // on a replacement, found before the job ran
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
