// PgPool: a bounded set of PostgreSQL connections lent to coroutines. A job runs on the awaiting
// coroutine's own executor with a connection of the pool, and its statements wait for the server through
// Asio (PgConnection): a statement costs no thread hand-off, only the wait for its answer. Internal to
// common/ (it exposes libpq); the stores built on it are the public API.
//
// A connection is checked before it is lent (PgConnection::Alive: one poll(2), no round trip): one whose
// server went away (a restart, a failover, a terminated session) is closed and a fresh one opened in its
// place, so a job that starts after the server is back never meets a connection that died with the old
// one. A job that fails anyway runs again, once, on a fresh connection where db/repeat_rule.hpp allows it
// (nothing of it was sent, the server was a read-only standby, or the caller marked it idempotent); a
// commit in doubt never does. Each connection closed because its server went away or turned read-only is
// logged (warn, one line) and counted (replaced(), DatabaseOptions::on_connection_replaced).
//
// Only opening a connection blocks (libpq resolves host names blocking): that happens on the pool's own
// threads, one per connection it may open, so an unreachable server never stalls an I/O thread.
//
// Thread safety: Run() may be called from any thread and executor, concurrently. A connection is lent to
// one job at a time.
#pragma once

#include <boost/asio/awaitable.hpp>
#include <boost/asio/thread_pool.hpp>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <type_traits>

#include "charge_outbox/db/database.hpp"
#include "db/call_deadline.hpp"
#include "db/pg_connection.hpp"
#include "db/repeat_rule.hpp"

namespace charge_outbox::db {

// The pool refused the job: its queue is full, no connection came free within database.call_timeout, or
// it is closed. Nothing was sent to the database.
class PoolOverloaded : public std::runtime_error {
 public:
  PoolOverloaded() : std::runtime_error("database pool queue is full") {}
  explicit PoolOverloaded(const std::string& why) : std::runtime_error(why) {}
};

class PgPool {
 public:
  PgPool(std::string database_url, DatabaseOptions options);
  ~PgPool();  // Close()
  PgPool(const PgPool&) = delete;
  PgPool& operator=(const PgPool&) = delete;

  // Refuses jobs from now on (PoolOverloaded), wakes the ones waiting for a connection with the same
  // refusal, closes the idle connections and waits for connections being opened. A job still running
  // finishes; its connection is closed when it ends. Idempotent. A daemon closes its pools while the
  // executors their jobs resume on still exist, so no opened connection lands in a destroyed one.
  void Close();

  // Runs `job(connection)`, a coroutine (PgConnection&) -> awaitable<T>, with a connection of the pool,
  // and returns what it returns or rethrows what it threw (pqxx::broken_connection when the server is
  // unreachable or the job ran past database.call_timeout). A connection that broke is closed, and the
  // next job opens another. The job may be called a second time, on a fresh connection, as `repeat` and
  // db/repeat_rule.hpp allow, within the same call_timeout: it must not keep state between calls that a
  // first, failed call would spoil. A standby's refusal of a write that is not run again comes back as
  // pqxx::broken_connection (unavailable: nothing was written).
  template <typename Job>
  auto Run(Job job, Repeat repeat = Repeat::kIfNotSent)
      -> boost::asio::awaitable<typename std::invoke_result_t<Job&, PgConnection&>::value_type>;

  std::size_t queued() const;
  // Connections closed because their server went away or turned read-only, since the pool opened.
  std::uint64_t replaced() const;

 private:
  struct Shared;
  struct Waiter;
  // A connection lent to one job; given back (or closed, if it broke or ran past its deadline) when it ends.
  class Lease {
   public:
    Lease(std::shared_ptr<Shared> shared, std::unique_ptr<PgConnection> connection,
          CallDeadlines::Clock::time_point deadline);
    Lease(Lease&&) noexcept = default;
    Lease& operator=(Lease&&) = delete;
    ~Lease();
    PgConnection& connection() { return *connection_; }
    // What `failure`, thrown by the job that held this lease, means (db/repeat_rule.hpp).
    JobFailure Classify(const std::exception_ptr& failure) const;
    // The job runs again elsewhere: a connection to a read-only server is closed, not lent again.
    void Retire(JobFailure failure) { retired_ = failure == JobFailure::kReadOnlyServer; }

   private:
    std::shared_ptr<Shared> shared_;
    std::unique_ptr<PgConnection> connection_;
    std::optional<CallDeadlines::Armed> armed_;
    bool retired_ = false;
  };
  boost::asio::awaitable<Lease> Acquire(CallDeadlines::Clock::time_point deadline);
  [[noreturn]] static void Rethrow(const std::exception_ptr& failure, JobFailure what);
  boost::asio::awaitable<std::unique_ptr<PgConnection>> Open();

  std::string url_;
  DatabaseOptions options_;
  std::shared_ptr<Shared> shared_;
  boost::asio::thread_pool opener_;
};

template <typename Job>
auto PgPool::Run(Job job, Repeat repeat)
    -> boost::asio::awaitable<typename std::invoke_result_t<Job&, PgConnection&>::value_type> {
  // One deadline for both runs: a second run never makes the caller wait longer than call_timeout.
  const auto deadline = CallDeadlines::Clock::now() + options_.connection.call_timeout;
  for (int run = 1;; ++run) {
    auto lease = co_await Acquire(deadline);
    std::exception_ptr failure;
    try {
      co_return co_await job(lease.connection());
    } catch (...) {
      failure = std::current_exception();
    }
    const JobFailure what = lease.Classify(failure);
    if (run > 1 || !MayRunAgain(what, repeat) || CallDeadlines::Clock::now() >= deadline) Rethrow(failure, what);
    lease.Retire(what);
  }
}

}  // namespace charge_outbox::db
