#include "charge_outbox/db/database.hpp"

#include <cctype>
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

std::string WithApplicationName(std::string_view url, std::string_view application_name) {
  std::string out(url);
  if (application_name.empty()) return out;
  if (url.starts_with("postgresql://") || url.starts_with("postgres://")) {
    out += url.find('?') == std::string_view::npos ? '?' : '&';
    out += "application_name=";
    constexpr char kHex[] = "0123456789ABCDEF";
    for (const char ch : application_name) {
      const auto c = static_cast<unsigned char>(ch);
      if (std::isalnum(c) || ch == '-' || ch == '_' || ch == '.') {
        out += ch;
      } else {
        out += '%';
        out += kHex[c >> 4];
        out += kHex[c & 0xF];
      }
    }
    return out;
  }
  // Keyword/value. In either form a later setting wins: the daemon's name replaces one the operator set.
  if (!out.empty()) out += ' ';
  out += "application_name='";
  for (const char c : application_name) {
    if (c == '\'' || c == '\\') out += '\\';
    out += c;
  }
  out += '\'';
  return out;
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
