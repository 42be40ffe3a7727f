// Database: the process's connection pool to PostgreSQL, shared by its stores, and the error vocabulary
// every store speaks. No libpqxx type crosses this header.
#pragma once

#include <boost/asio/awaitable.hpp>
#include <boost/system/result.hpp>

#include <cstddef>
#include <memory>
#include <string>
#include <string_view>

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

// Whether the same statement may succeed if sent again: the server was unreachable, the pool full, or the
// commit in doubt. A refused statement (kFailed) would be refused again.
bool IsTransient(const DbError& error);

// `url` with the session's application_name added (what pg_stat_activity shows), in the URL's own form:
// a query parameter of a postgres:// or postgresql:// URI, a quoted keyword of a keyword/value string
// ("host=db user=charge"). libpq accepts both as DATABASE_URL; appending "?..." to the second breaks it.
std::string WithApplicationName(std::string_view url, std::string_view application_name);

struct DatabaseOptions {
  std::size_t connections = 8;
  std::size_t max_queued = 1024;
  std::string application_name;  // shows in pg_stat_activity
};

// Owns the pool; thread-safe; outlives every store built on it.
class Database {
 public:
  Database(std::string url, DatabaseOptions options);
  ~Database();
  Database(const Database&) = delete;
  Database& operator=(const Database&) = delete;

  PgPool& pool() { return *pool_; }

  // The highest applied migration: what /readyz checks against the build's version.
  boost::asio::awaitable<DbResult<int>> SchemaVersion();

 private:
  std::unique_ptr<PgPool> pool_;
};

}  // namespace charge_outbox::db
