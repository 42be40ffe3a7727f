// PgConnection: one libpq connection driven without blocking by the coroutine that holds it, on that
// coroutine's own executor: a statement is sent, the coroutine waits for the socket with Asio, and the
// answer is read on whatever thread Asio resumes it. No thread hand-off per statement (PgPool lends these).
// Internal to common/.
//
// Failures keep libpqxx's types, which the stores and CurrentDbError already decide on:
// pqxx::broken_connection when the session is lost (or cut by its call deadline), pqxx::sql_error with the
// SQLSTATE when the server refused the statement. A connection that was lost, or whose statement was
// abandoned half-way, is not ok() and never runs another statement.
//
// Thread safety: one coroutine at a time (PgPool's lease guarantees it).
#pragma once

#include <libpq-fe.h>

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>

#include <charconv>
#include <cstdint>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include "db/statement.hpp"

namespace charge_outbox::db {

// One value of a result: text, as the server sent it.
class PgField {
 public:
  PgField(const PGresult* result, int row, int column) : result_(result), row_(row), column_(column) {}

  bool is_null() const { return PQgetisnull(result_, row_, column_) != 0; }
  std::string_view view() const {
    return {PQgetvalue(result_, row_, column_), static_cast<std::size_t>(PQgetlength(result_, row_, column_))};
  }
  // std::string or an integer; a NULL or a value that does not parse throws std::domain_error.
  template <typename T>
  T as() const;
  template <typename T>
  std::optional<T> optional() const {
    return is_null() ? std::nullopt : std::optional<T>(as<T>());
  }

 private:
  [[noreturn]] void Unconvertible(const char* type) const;
  const PGresult* result_;
  int row_;
  int column_;
};

class PgRow {
 public:
  PgRow(const PGresult* result, int row) : result_(result), row_(row) {}
  PgField operator[](int column) const { return {result_, row_, column}; }
  int size() const { return PQnfields(result_); }

 private:
  const PGresult* result_;
  int row_;
};

// The rows of one statement; owns its PGresult.
class PgResult {
 public:
  PgResult() = default;
  explicit PgResult(PGresult* result) : result_(result, &PQclear) {}

  std::size_t size() const { return result_ ? static_cast<std::size_t>(PQntuples(result_.get())) : 0; }
  bool empty() const { return size() == 0; }
  PgRow operator[](std::size_t row) const { return {result_.get(), static_cast<int>(row)}; }

  class Iterator {
   public:
    Iterator(const PGresult* result, int row) : result_(result), row_(row) {}
    PgRow operator*() const { return {result_, row_}; }
    Iterator& operator++() {
      ++row_;
      return *this;
    }
    bool operator==(const Iterator& other) const { return row_ == other.row_; }

   private:
    const PGresult* result_;
    int row_;
  };
  Iterator begin() const { return {result_.get(), 0}; }
  Iterator end() const { return {result_.get(), static_cast<int>(size())}; }

 private:
  std::unique_ptr<PGresult, void (*)(PGresult*)> result_{nullptr, &PQclear};
};

// A statement's parameters in text form; a null pointer (or std::nullopt) is SQL NULL.
class PgParams {
 public:
  PgParams() = default;
  template <typename... Args>
  explicit PgParams(const Args&... args) {
    values_.reserve(sizeof...(args));
    (Add(args), ...);
  }

  void Add(const std::string& v) { values_.push_back(Text{v}); }
  void Add(std::string_view v) { values_.push_back(Text{std::string(v)}); }
  void Add(const char* v) { values_.push_back(v ? std::optional<std::string>(v) : std::nullopt); }
  void Add(const std::optional<std::string>& v) { values_.push_back(v); }
  template <typename Int>
    requires std::is_integral_v<Int>
  void Add(Int v) {
    values_.push_back(Text{std::to_string(v)});
  }

  // Pointers into this object: valid while it lives and is not added to.
  std::vector<const char*> Pointers() const;

 private:
  using Text = std::optional<std::string>;
  std::vector<Text> values_;
};

class PgConnection {
 public:
  // Opens a connection, blocking for at most the connection string's connect_timeout (its host name may
  // need a DNS lookup, which libpq only does blocking): PgPool calls it on a thread of its own. Throws
  // pqxx::broken_connection.
  static std::unique_ptr<PgConnection> Open(const std::string& connection_string);
  ~PgConnection();
  PgConnection(const PgConnection&) = delete;
  PgConnection& operator=(const PgConnection&) = delete;

  // Runs `statement`, preparing it on this connection first if it has not been yet, in autocommit unless
  // a transaction is open. Waits on, and resumes on, the awaiting coroutine's executor.
  boost::asio::awaitable<PgResult> Execute(const Statement& statement, const PgParams& params);
  template <typename... Args>
  boost::asio::awaitable<PgResult> Execute(const Statement& statement, const Args&... args) {
    const PgParams params(args...);
    co_return co_await Execute(statement, params);
  }
  // Runs SQL that is not one of the prepared statements (parsed on every call).
  boost::asio::awaitable<PgResult> ExecuteText(std::string_view sql, const PgParams& params = {});

  bool ok() const { return !abandoned_ && PQstatus(conn_) == CONNECTION_OK; }
  // ok(), and no transaction left open: what the pool may lend to the next job.
  bool reusable() const { return ok() && PQtransactionStatus(conn_) == PQTRANS_IDLE; }
  // The server ended the session (or the network did): not a statement abandoned by its job.
  bool lost() const { return PQstatus(conn_) != CONNECTION_OK || closing_; }
  int socket() const { return PQsocket(conn_); }
  int backend_pid() const { return PQbackendPID(conn_); }

  // Whether an idle connection still has its server, without a round trip: what already arrived on its
  // socket is read (a server that shut down, restarted or ended the session has sent its FATAL and closed,
  // long before a request comes), and a connection that met its end there is not alive. A server that
  // vanished without a word (a dead host) is found by TCP keepalives while the connection idles
  // (database.keepalives_*), which also end up here as an error on the socket. Costs one poll(2).
  bool Alive();
  // Why this connection was lost, for a log line: the server's last word (a FATAL's SQLSTATE and message)
  // or libpq's. Never holds a parameter or a password.
  std::string LostReason() const;
  // The server says it is read-only as a whole (a hot standby, or default_transaction_read_only): what
  // PostgreSQL 14 and later report to every session, so asking costs nothing.
  bool ServerReadOnly() const;
  // host:port of the server (as libpq connected to it), for log lines.
  std::string Endpoint() const;

  // Whether a statement was handed to libpq since the last ForgetSent(): what the pool's repeat rule
  // needs to know (db/repeat_rule.hpp). Preparing a statement does not count: it changes nothing.
  bool sent() const { return sent_; }
  void ForgetSent() { sent_ = false; }

 private:
  explicit PgConnection(PGconn* conn) : conn_(conn) {}
  template <typename Send>
  boost::asio::awaitable<PgResult> RoundTrip(Send send, const char* what, bool executes);
  [[noreturn]] void ThrowLost(const char* what) const;
  static void OnNotice(void* self, const PGresult* notice);

  PGconn* conn_;
  std::vector<const char*> prepared_;  // Statement names (static strings) prepared on this session
  // Set while a statement is on the wire: a coroutine destroyed then leaves an answer nobody will read.
  bool abandoned_ = false;
  bool sent_ = false;
  // The server sent a FATAL (or PANIC) outside any statement: it ends the session right after.
  bool closing_ = false;
  std::string server_word_;  // that message, "SQLSTATE: text"
  PQnoticeReceiver default_receiver_ = nullptr;
};

template <typename T>
T PgField::as() const {
  if (is_null()) Unconvertible("a value (it is NULL)");
  const auto text = view();
  if constexpr (std::is_same_v<T, std::string>) {
    return std::string(text);
  } else {
    static_assert(std::is_integral_v<T> && !std::is_same_v<T, bool>, "PgField::as: std::string or an integer");
    T value{};
    const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
    if (error != std::errc() || end != text.data() + text.size()) Unconvertible("an integer");
    return value;
  }
}

}  // namespace charge_outbox::db
