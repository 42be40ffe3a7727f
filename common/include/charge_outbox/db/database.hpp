// Database: the process's connection pool to PostgreSQL, shared by its stores, and the error vocabulary
// every store speaks. No libpqxx type crosses this header.
#pragma once

#include <boost/asio/awaitable.hpp>
#include <boost/system/result.hpp>

#include <chrono>
#include <cstddef>
#include <functional>
#include <memory>
#include <string>
#include <string_view>

#include "charge_outbox/retry/retryability.hpp"

namespace charge_outbox::config {
class ConfigReader;
}

namespace charge_outbox::db {

class PgPool;  // internal: common/src/db/pg_pool.hpp

enum class DbErrc {
  kUnavailable,  // could not reach the server, or lost it before committing: nothing was written
  kOverloaded,   // the pool's queue is full: nothing was sent
  kInDoubt,      // the connection died during COMMIT: it may or may not have committed; re-read to find out
  kFailed,       // the server refused the statement (a bug or a violated constraint): do not retry blindly
};

struct DbError {
  DbErrc code = DbErrc::kFailed;
  std::string detail;  // for logs; never holds parameters (they may be secrets or card tokens)
};

template <typename T>
using DbResult = boost::system::result<T, DbError>;

// Lets DbResult::value() throw (found by ADL): for tests and start-up code, where an error is fatal.
[[noreturn]] void throw_exception_from_error(const DbError& error, const boost::source_location& location);

std::string_view ToString(DbErrc code);

// Whether the same statement may succeed if sent again (kTransient): the server was unreachable, the pool
// full, or the commit in doubt. A refused statement (kFailed) would be refused again (kNever). The one
// place the database's transient errors are listed; callers read the class (retry::IsTransient).
retry::Retryability RetryabilityOf(const DbError& error);

// How every connection of ours behaves when the network or the server hangs instead of failing: the
// `database.*` keys (LoadConnectionSettings). A zero duration leaves that setting to libpq or the server.
// Defaults are seconds, not minutes: a payment waiting on a hung database is better answered 503.
struct ConnectionSettings {
  // libpq connect_timeout: the whole connection set-up (TCP, TLS, authentication). libpq counts whole
  // seconds and takes 1 as 2.
  std::chrono::seconds connect_timeout{5};
  // Client-side TCP: a peer that stopped answering is found while the connection is idle (keepalives:
  // after idle + interval * count) and while a statement is unacknowledged (tcp_user_timeout).
  std::chrono::seconds keepalives_idle{5};
  std::chrono::seconds keepalives_interval{2};
  int keepalives_count = 3;
  std::chrono::milliseconds tcp_user_timeout{10'000};
  // Server-side, sent as `options=-c ...` at start-up: the server cancels a statement past this, ends a
  // session idle inside a transaction past that (its row locks with it), and finds a vanished client by
  // the same keepalives (then ends its session, and the relay's advisory locks go with it).
  std::chrono::milliseconds statement_timeout{5'000};
  std::chrono::milliseconds idle_in_transaction_timeout{10'000};
  // Client-side deadline of one database call (a pool job or a relay-session operation, waiting for a
  // connection included): past it, the connection is shut down under the call, which then fails as
  // unavailable (in doubt during COMMIT). Longer than statement_timeout, so a slow server normally
  // answers first; it is the bound when nothing answers at all.
  std::chrono::milliseconds call_timeout{10'000};
};

// Reads the `database.*` keys of ConnectionSettings; throws config::ConfigError naming a bad one. Every
// daemon calls it, so all of them accept the same keys with the same meaning.
ConnectionSettings LoadConnectionSettings(config::ConfigReader& reader);

// The one connection string every connection of ours opens: `url` (DATABASE_URL, either a postgres:// or
// postgresql:// URI, or a keyword/value string such as "host=db user=charge") with application_name and
// `settings` added in the URL's own form (a query parameter of a URI; a quoted keyword otherwise).
// Precedence: a setting the URL already has wins (connect_timeout=..., keepalives_idle=...); the URL's
// own `options` are kept and come after ours, so a `-c statement_timeout=...` there wins too. The daemon's
// application_name replaces one the URL sets (pg_stat_activity must say which daemon a session is).
std::string ConnectionString(std::string_view url, std::string_view application_name,
                             const ConnectionSettings& settings);

// A pool of connections (Database, and the PgPool under it).
struct DatabaseOptions {
  std::size_t connections = 8;
  // Jobs waiting for a connection beyond this are refused at once (PoolOverloaded): shedding load
  // beats a queue that grows until every request times out.
  std::size_t max_queued = 1024;
  std::string application_name;  // shows in pg_stat_activity
  // Timeouts of every connection, and call_timeout: a job still waiting for a connection past it fails
  // without being sent (PoolOverloaded), one still running is cut short (see CallDeadlines).
  ConnectionSettings connection;
  // Called (from any thread) each time a connection is closed because its server went away (a restart, a
  // failover) or turned out read-only, and a fresh one takes its place: the daemon's probe counts it.
  std::function<void()> on_connection_replaced;

  // Another pool of the same daemon (charge-api's authentication and readiness pools): the same
  // connection settings and replacement count, its own name in pg_stat_activity and its own size.
  DatabaseOptions OtherPool(std::string name, std::size_t pool_connections, std::size_t pool_max_queued) const {
    return {pool_connections, pool_max_queued, std::move(name), connection, on_connection_replaced};
  }
};

// Owns the pool; thread-safe; outlives every store built on it.
class Database {
 public:
  Database(std::string url, DatabaseOptions options);
  ~Database();
  Database(const Database&) = delete;
  Database& operator=(const Database&) = delete;

  PgPool& pool() { return *pool_; }

  // Runs the jobs already queued, joins the workers and refuses new ones (see PgPool::Close).
  void Close();

  // The highest applied migration: what /readyz checks against the build's version.
  boost::asio::awaitable<DbResult<int>> SchemaVersion();

 private:
  std::unique_ptr<PgPool> pool_;
};

}  // namespace charge_outbox::db
