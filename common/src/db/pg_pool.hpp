// PgPool: a bounded set of PostgreSQL connections lent to coroutines. A job runs on the awaiting
// coroutine's own executor with a connection of the pool, and its statements wait for the server through
// Asio (PgConnection): a statement costs no thread hand-off, only the wait for its answer. Internal to
// common/ (it exposes libpq); the stores built on it are the public API.
//
// Only opening a connection blocks (libpq resolves host names blocking): that happens on the pool's own
// threads, one per connection it may open, so an unreachable server never stalls an I/O thread.
//
// Thread safety: Run() may be called from any thread and executor, concurrently. A connection is lent to
// one job at a time.
#pragma once

#include <boost/asio/awaitable.hpp>
#include <boost/asio/thread_pool.hpp>

#include <cstddef>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <type_traits>

#include "charge_outbox/db/database.hpp"
#include "db/call_deadline.hpp"
#include "db/pg_connection.hpp"

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
  // next job opens another.
  template <typename Job>
  auto Run(Job job) -> boost::asio::awaitable<typename std::invoke_result_t<Job&, PgConnection&>::value_type>;

  std::size_t queued() const;

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

   private:
    std::shared_ptr<Shared> shared_;
    std::unique_ptr<PgConnection> connection_;
    std::optional<CallDeadlines::Armed> armed_;
  };
  boost::asio::awaitable<Lease> Acquire();
  boost::asio::awaitable<std::unique_ptr<PgConnection>> Open();

  std::string url_;
  DatabaseOptions options_;
  std::shared_ptr<Shared> shared_;
  boost::asio::thread_pool opener_;
};

template <typename Job>
auto PgPool::Run(Job job) -> boost::asio::awaitable<typename std::invoke_result_t<Job&, PgConnection&>::value_type> {
  auto lease = co_await Acquire();
  co_return co_await job(lease.connection());
}

}  // namespace charge_outbox::db
