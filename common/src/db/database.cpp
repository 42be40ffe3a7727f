#include "charge_outbox/db/database.hpp"

#include <cctype>
#include <map>
#include <stdexcept>
#include <utility>
#include <vector>

#include "charge_outbox/config/config.hpp"

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

namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

bool IsUri(std::string_view url) { return url.starts_with("postgresql://") || url.starts_with("postgres://"); }

std::string PercentDecode(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  auto hex = [](char c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
  };
  for (std::size_t i = 0; i < text.size(); ++i) {
    if (text[i] == '%' && i + 2 < text.size() && hex(text[i + 1]) >= 0 && hex(text[i + 2]) >= 0) {
      out += static_cast<char>(hex(text[i + 1]) * 16 + hex(text[i + 2]));
      i += 2;
    } else {
      out += text[i];
    }
  }
  return out;
}

std::string PercentEncode(std::string_view text) {
  constexpr char kHex[] = "0123456789ABCDEF";
  std::string out;
  for (const char ch : text) {
    const auto c = static_cast<unsigned char>(ch);
    if (std::isalnum(c) || ch == '-' || ch == '_' || ch == '.' || ch == '~') {
      out += ch;
    } else {
      out += '%';
      out += kHex[c >> 4];
      out += kHex[c & 0xF];
    }
  }
  return out;
}

std::string Quote(std::string_view value) {
  std::string out = "'";
  for (const char c : value) {
    if (c == '\'' || c == '\\') out += '\\';
    out += c;
  }
  out += '\'';
  return out;
}

// The settings DATABASE_URL already has, decoded, as libpq reads them (the last of a repeated one).
std::map<std::string, std::string, std::less<>> ParseSettings(std::string_view url) {
  std::map<std::string, std::string, std::less<>> out;
  if (IsUri(url)) {
    const auto query = url.find('?');
    if (query == std::string_view::npos) return out;
    std::string_view rest = url.substr(query + 1);
    while (!rest.empty()) {
      const auto amp = rest.find('&');
      const auto pair = rest.substr(0, amp);
      const auto eq = pair.find('=');
      out[PercentDecode(pair.substr(0, eq))] = eq == std::string_view::npos ? "" : PercentDecode(pair.substr(eq + 1));
      rest = amp == std::string_view::npos ? std::string_view{} : rest.substr(amp + 1);
    }
    return out;
  }
  // keyword = value, the value bare or in single quotes, backslash escaping the next character.
  std::size_t i = 0;
  auto space = [&] {
    while (i < url.size() && std::isspace(static_cast<unsigned char>(url[i]))) ++i;
  };
  while (true) {
    space();
    if (i >= url.size()) break;
    std::string key;
    while (i < url.size() && url[i] != '=' && !std::isspace(static_cast<unsigned char>(url[i]))) key += url[i++];
    space();
    if (i >= url.size() || url[i] != '=') break;  // malformed: libpq will say so when it connects
    ++i;
    space();
    std::string value;
    const bool quoted = i < url.size() && url[i] == '\'';
    if (quoted) ++i;
    while (i < url.size()) {
      const char c = url[i];
      if (quoted ? c == '\'' : std::isspace(static_cast<unsigned char>(c)) != 0) break;
      if (c == '\\' && i + 1 < url.size()) ++i;
      value += url[i++];
    }
    if (quoted && i < url.size()) ++i;
    out[std::move(key)] = std::move(value);
  }
  return out;
}

// The server-side settings, as `-c name=value` switches of the start-up packet's options.
std::string ServerOptions(const ConnectionSettings& s) {
  std::string out;
  auto add = [&](const char* name, long long value) {
    if (value <= 0) return;
    if (!out.empty()) out += ' ';
    out += "-c ";
    out += name;
    out += '=';
    out += std::to_string(value);
  };
  add("statement_timeout", s.statement_timeout.count());
  add("idle_in_transaction_session_timeout", s.idle_in_transaction_timeout.count());
  add("tcp_keepalives_idle", s.keepalives_idle.count());
  add("tcp_keepalives_interval", s.keepalives_interval.count());
  add("tcp_keepalives_count", s.keepalives_count);
  add("tcp_user_timeout", s.tcp_user_timeout.count());
  return out;
}

}  // namespace

std::string ConnectionString(std::string_view url, std::string_view application_name,
                             const ConnectionSettings& settings) {
  const auto present = ParseSettings(url);
  std::vector<std::pair<std::string, std::string>> added;
  auto add = [&](const char* key, long long value) {
    if (value > 0 && !present.contains(key)) added.emplace_back(key, std::to_string(value));
  };
  add("connect_timeout", settings.connect_timeout.count());
  add("keepalives", 1);
  add("keepalives_idle", settings.keepalives_idle.count());
  add("keepalives_interval", settings.keepalives_interval.count());
  add("keepalives_count", settings.keepalives_count);
  add("tcp_user_timeout", settings.tcp_user_timeout.count());
  // Ours first: in `options` the last -c of a name wins, so the URL's own options keep the final word.
  auto options = ServerOptions(settings);
  if (const auto theirs = present.find("options"); theirs != present.end() && !options.empty()) {
    options += ' ' + theirs->second;
  }
  if (!options.empty()) added.emplace_back("options", std::move(options));
  // Added last: it replaces a name the URL sets (in both forms the last setting of a keyword wins).
  if (!application_name.empty()) added.emplace_back("application_name", std::string(application_name));

  std::string out(url);
  const bool uri = IsUri(url);
  for (const auto& [key, value] : added) {
    if (uri) {
      out += out.find('?') == std::string::npos ? '?' : '&';
      out += key + '=' + PercentEncode(value);
    } else {
      if (!out.empty()) out += ' ';
      out += key + '=' + Quote(value);
    }
  }
  return out;
}

ConnectionSettings LoadConnectionSettings(config::ConfigReader& r) {
  ConnectionSettings s;
  // TCP keepalives and libpq's connect_timeout count whole seconds: a value between two rounds up.
  auto whole_seconds = [&](const char* key, seconds fallback, seconds min, seconds max) {
    return std::chrono::ceil<seconds>(r.Duration(key, fallback, min, max));
  };
  s.connect_timeout = whole_seconds("database.connect_timeout", s.connect_timeout, seconds{2}, std::chrono::minutes{5});
  s.keepalives_idle = whole_seconds("database.keepalives_idle", s.keepalives_idle, seconds{1}, std::chrono::hours{1});
  s.keepalives_interval =
      whole_seconds("database.keepalives_interval", s.keepalives_interval, seconds{1}, std::chrono::minutes{10});
  s.keepalives_count = static_cast<int>(r.Integer("database.keepalives_count", s.keepalives_count, 1, 100));
  s.tcp_user_timeout = r.Duration("database.tcp_user_timeout", s.tcp_user_timeout, milliseconds{0}, std::chrono::hours{1});
  s.statement_timeout =
      r.Duration("database.statement_timeout", s.statement_timeout, milliseconds{0}, std::chrono::hours{1});
  s.idle_in_transaction_timeout = r.Duration("database.idle_in_transaction_timeout", s.idle_in_transaction_timeout,
                                             milliseconds{0}, std::chrono::hours{1});
  s.call_timeout = r.Duration("database.call_timeout", s.call_timeout, milliseconds{100}, std::chrono::hours{1});
  if (s.statement_timeout.count() > 0 && s.call_timeout <= s.statement_timeout) {
    throw config::ConfigError("database.call_timeout",
                              "must be longer than database.statement_timeout (" +
                                  std::to_string(s.statement_timeout.count()) +
                                  "ms): the server should cancel a slow statement before the client gives up on it");
  }
  return s;
}

retry::Retryability RetryabilityOf(const DbError& error) {
  switch (error.code) {
    case DbErrc::kUnavailable:
    case DbErrc::kOverloaded:
    case DbErrc::kInDoubt: return retry::Retryability::kTransient;
    case DbErrc::kFailed: return retry::Retryability::kNever;
  }
  return retry::Retryability::kNever;
}

void throw_exception_from_error(const DbError& error, const boost::source_location& location) {
  throw std::runtime_error("database " + std::string(ToString(error.code)) + " at " + location.to_string() + ": " +
                           error.detail);
}

Database::Database(std::string url, DatabaseOptions options)
    : pool_(std::make_unique<PgPool>(std::move(url), std::move(options))) {}

Database::~Database() = default;

void Database::Close() { pool_->Close(); }

boost::asio::awaitable<DbResult<int>> Database::SchemaVersion() {
  try {
    // A read: run again on a fresh connection if its first one dies under it.
    co_return co_await pool_->Run(
        [](PgConnection& conn) -> boost::asio::awaitable<int> {
          const auto r = co_await conn.ExecuteText("SELECT COALESCE(max(version), 0) FROM schema_migrations");
          co_return r[0][0].as<int>();
        },
        Repeat::kIdempotent);
  } catch (...) {
    co_return CurrentDbError();
  }
}

}  // namespace charge_outbox::db
