#include "charge_outbox/db/database.hpp"

#include <stdexcept>

#include "db/db_errors.hpp"
#include "db/pg_pool.hpp"

namespace charge_outbox::db {

std::string_view ToString(DbErrc code) {
  switch (code) {
    case DbErrc::kUnavailable: return "unavailable";
    case DbErrc::kOverloaded: return "overloaded";
    case DbErrc::kInDoubt: return "in_doubt";
    case DbErrc::kFailed: return "failed";
  }
  return "unknown";
}

bool IsTransient(const DbError& error) {
  switch (error.code) {
    case DbErrc::kUnavailable:
    case DbErrc::kOverloaded:
    case DbErrc::kInDoubt: return true;
    case DbErrc::kFailed: return false;
  }
  return false;
}

void throw_exception_from_error(const DbError& error, const boost::source_location& location) {
  throw std::runtime_error("database " + std::string(ToString(error.code)) + " at " + location.to_string() + ": " +
                           error.detail);
}

Database::Database(std::string url, DatabaseOptions options)
    : pool_(std::make_unique<PgPool>(std::move(url), PgPoolOptions{.connections = options.connections,
                                                                   .max_queued = options.max_queued,
                                                                   .application_name = options.application_name})) {}

Database::~Database() = default;

boost::asio::awaitable<DbResult<int>> Database::SchemaVersion() {
  try {
    co_return co_await pool_->Run([](pqxx::connection& conn) {
      pqxx::nontransaction tx(conn);
      return tx.exec1("SELECT COALESCE(max(version), 0) FROM schema_migrations")[0].as<int>();
    });
  } catch (...) {
    co_return CurrentDbError();
  }
}

}  // namespace charge_outbox::db
