#include "db/pg_connection.hpp"

#include <poll.h>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/associated_executor.hpp>
#include <boost/asio/bind_executor.hpp>
#include <boost/asio/async_result.hpp>
#include <boost/asio/error.hpp>
#include <boost/asio/posix/stream_descriptor.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <pqxx/pqxx>

#include <algorithm>
#include <mutex>
#include <string_view>
#include <tuple>

namespace charge_outbox::db {
namespace {

namespace asio = boost::asio;

// libpq's message without its trailing newline.
std::string Message(const char* text) {
  std::string out(text ? text : "");
  while (!out.empty() && (out.back() == '\n' || out.back() == ' ')) out.pop_back();
  return out;
}

// The connection's socket, watched by the executor's reactor for the length of one statement and then
// handed back to libpq, which owns it.
class BorrowedSocket {
 public:
  BorrowedSocket(const asio::any_io_executor& executor, int fd) : descriptor_(executor, fd), fd_(fd) {}
  ~BorrowedSocket() { descriptor_.release(); }
  BorrowedSocket(const BorrowedSocket&) = delete;
  BorrowedSocket& operator=(const BorrowedSocket&) = delete;

  // Waits until the socket is readable (or writable). Asio watches sockets edge-triggered and does not
  // look before it waits: bytes that arrived between libpq's last read and this wait, seen by another
  // thread of the executor, would leave it waiting for an edge that never comes. So it looks itself once
  // the wait is queued, and cancels the wait when the socket is already ready: the caller reads again.
  // The wait can complete on another thread meanwhile; its handler holds the coroutine (and this socket)
  // until the start is over.
  asio::awaitable<void> Wait(asio::posix::descriptor_base::wait_type type) {
    const short events = type == asio::posix::descriptor_base::wait_read ? POLLIN : POLLOUT;
    auto token = asio::as_tuple(asio::use_awaitable);
    const std::tuple<boost::system::error_code> waited =
        co_await asio::async_initiate<decltype(token), void(boost::system::error_code)>(
            [this, type, events](auto handler) {
              std::lock_guard starting(starting_);
              const auto executor = asio::get_associated_executor(handler, descriptor_.get_executor());
              descriptor_.async_wait(
                  type, asio::bind_executor(executor, [this, handler = std::move(handler)](
                                                          const boost::system::error_code& error) mutable {
                    { std::lock_guard started(starting_); }
                    std::move(handler)(error);
                  }));
              pollfd ready{fd_, events, 0};
              if (::poll(&ready, 1, 0) > 0) {
                boost::system::error_code ignored;
                descriptor_.cancel(ignored);
              }
            },
            token);
    const auto& error = std::get<0>(waited);
    if (error && error != asio::error::operation_aborted) {
      throw pqxx::broken_connection("waiting for the database: " + error.message());
    }
  }

 private:
  asio::posix::stream_descriptor descriptor_;
  int fd_;
  std::mutex starting_;
};

// The SQLSTATE and message of a failed result, as libpqxx reports them.
[[noreturn]] void ThrowStatementError(const PGresult* result, const char* what) {
  const char* state = PQresultErrorField(result, PG_DIAG_SQLSTATE);
  throw pqxx::sql_error(Message(PQresultErrorMessage(result)), what, state);
}

}  // namespace

void PgField::Unconvertible(const char* type) const {
  throw std::domain_error("column " + std::to_string(column_) + " of row " + std::to_string(row_) +
                          " is not " + type);
}

std::vector<const char*> PgParams::Pointers() const {
  std::vector<const char*> out;
  out.reserve(values_.size());
  for (const auto& v : values_) out.push_back(v ? v->c_str() : nullptr);
  return out;
}

std::unique_ptr<PgConnection> PgConnection::Open(const std::string& connection_string) {
  PGconn* conn = PQconnectdb(connection_string.c_str());
  if (conn == nullptr) throw pqxx::broken_connection("out of memory opening a database connection");
  if (PQstatus(conn) != CONNECTION_OK) {
    const auto why = Message(PQerrorMessage(conn));
    PQfinish(conn);
    throw pqxx::broken_connection(why);
  }
  if (PQsetnonblocking(conn, 1) != 0) {
    const auto why = Message(PQerrorMessage(conn));
    PQfinish(conn);
    throw pqxx::broken_connection(why);
  }
  std::unique_ptr<PgConnection> connection(new PgConnection(conn));
  // libpq's default receiver ignores its argument (it prints through the notice processor).
  connection->default_receiver_ = PQsetNoticeReceiver(conn, &PgConnection::OnNotice, connection.get());
  return connection;
}

PgConnection::~PgConnection() { PQfinish(conn_); }

// libpq hands an ErrorResponse (or a notice) that arrives outside a statement to the notice receiver:
// that is how a server's last word before it closes a session reaches an idle connection. A FATAL or
// PANIC, or a shutdown's warning (57P01 admin_shutdown: an immediate shutdown warns, then quits; 57P02
// crash_shutdown), means the session is ending: remembered, and logged once by the pool when it replaces
// the connection, not printed on stderr. Everything else goes to libpq's default.
void PgConnection::OnNotice(void* self, const PGresult* notice) {
  auto* connection = static_cast<PgConnection*>(self);
  const char* severity = PQresultErrorField(notice, PG_DIAG_SEVERITY_NONLOCALIZED);
  const char* state = PQresultErrorField(notice, PG_DIAG_SQLSTATE);
  const std::string_view level = severity != nullptr ? severity : "";
  const std::string_view code = state != nullptr ? state : "";
  if (level == "FATAL" || level == "PANIC" || code == "57P01" || code == "57P02") {
    connection->closing_ = true;
    const char* text = PQresultErrorField(notice, PG_DIAG_MESSAGE_PRIMARY);
    connection->server_word_ = std::string(state != nullptr ? state : "?????") + ": " + Message(text);
    return;
  }
  if (connection->default_receiver_ != nullptr) connection->default_receiver_(nullptr, notice);
}

bool PgConnection::Alive() {
  if (!ok() || closing_ || PQtransactionStatus(conn_) != PQTRANS_IDLE) return false;
  // Each read takes what is there; the end of the stream is seen by the read after the last bytes.
  for (int reads = 0; reads < 8; ++reads) {
    pollfd ready{PQsocket(conn_), POLLIN, 0};
    if (::poll(&ready, 1, 0) <= 0) return true;  // nothing arrived: as good as when it was last used
    if (PQconsumeInput(conn_) == 0) return false;
    PQisBusy(conn_);  // parses what arrived: a FATAL reaches OnNotice, a ParameterStatus is recorded
    while (PGnotify* notify = PQnotifies(conn_)) PQfreemem(notify);
    if (PQstatus(conn_) != CONNECTION_OK || closing_) return false;
  }
  return true;  // a server still talking (notices) is a server
}

std::string PgConnection::LostReason() const {
  if (!server_word_.empty()) return server_word_;
  const auto libpq = Message(PQerrorMessage(conn_));
  if (const auto nl = libpq.find('\n'); nl != std::string::npos) return libpq.substr(0, nl);
  return libpq.empty() ? "the server closed the connection" : libpq;
}

bool PgConnection::ServerReadOnly() const {
  for (const char* name : {"in_hot_standby", "default_transaction_read_only"}) {
    const char* value = PQparameterStatus(conn_, name);
    if (value != nullptr && std::string_view(value) == "on") return true;
  }
  return false;
}

std::string PgConnection::Endpoint() const {
  const char* host = PQhost(conn_);
  const char* port = PQport(conn_);
  return std::string(host != nullptr ? host : "?") + ":" + (port != nullptr ? port : "?");
}

void PgConnection::ThrowLost(const char* what) const {
  throw pqxx::broken_connection(std::string(what) + ": " + Message(PQerrorMessage(conn_)));
}

template <typename Send>
asio::awaitable<PgResult> PgConnection::RoundTrip(Send send, const char* what, bool executes) {
  if (!ok()) ThrowLost(what);
  BorrowedSocket socket(co_await asio::this_coro::executor, PQsocket(conn_));
  abandoned_ = true;
  // libpq refuses (0) before a byte of the statement leaves; from 1 on it may reach the server. (A write
  // that fails later is reported by the read, as a lost connection with the statement sent.)
  if (send() == 0) ThrowLost(what);
  if (executes) sent_ = true;
  // What does not fit the socket's buffer waits for it to drain; libpq asks that whatever the server sent
  // meanwhile be read too, or a server blocked on its own writes would never read ours.
  while (true) {
    const int flushed = PQflush(conn_);
    if (flushed == 0) break;
    if (flushed < 0) ThrowLost(what);
    co_await socket.Wait(asio::posix::descriptor_base::wait_write);
    if (PQconsumeInput(conn_) == 0) ThrowLost(what);
  }
  // One statement, one result; libpq then says there is no more with a null. A server that fails the
  // statement answers with an error result in its place.
  PgResult result;
  const PGresult* failed = nullptr;
  PgResult failure;
  while (true) {
    while (PQisBusy(conn_)) {
      co_await socket.Wait(asio::posix::descriptor_base::wait_read);
      if (PQconsumeInput(conn_) == 0) ThrowLost(what);
    }
    PGresult* next = PQgetResult(conn_);
    if (next == nullptr) break;
    const auto status = PQresultStatus(next);
    if (status == PGRES_TUPLES_OK || status == PGRES_COMMAND_OK) {
      result = PgResult(next);
    } else {
      failure = PgResult(next);
      failed = next;
    }
  }
  abandoned_ = false;
  if (PQstatus(conn_) != CONNECTION_OK) ThrowLost(what);
  if (failed != nullptr) ThrowStatementError(failed, what);
  co_return result;
}

asio::awaitable<PgResult> PgConnection::Execute(const Statement& statement, const PgParams& params) {
  if (std::ranges::find(prepared_, statement.name) == prepared_.end()) {
    co_await RoundTrip([&] { return PQsendPrepare(conn_, statement.name, statement.sql, 0, nullptr); },
                       statement.name, false);
    prepared_.push_back(statement.name);
  }
  const auto values = params.Pointers();
  co_return co_await RoundTrip(
      [&] {
        return PQsendQueryPrepared(conn_, statement.name, static_cast<int>(values.size()), values.data(), nullptr,
                                   nullptr, 0);
      },
      statement.name, true);
}

asio::awaitable<PgResult> PgConnection::ExecuteText(std::string_view sql, const PgParams& params) {
  const std::string text(sql);
  const auto values = params.Pointers();
  co_return co_await RoundTrip(
      [&] {
        return PQsendQueryParams(conn_, text.c_str(), static_cast<int>(values.size()), nullptr, values.data(),
                                 nullptr, nullptr, 0);
      },
      "a query", true);
}

}  // namespace charge_outbox::db
