#include "db/pg_pool.hpp"

#include <spdlog/spdlog.h>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/async_result.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <pqxx/pqxx>

#include <algorithm>
#include <chrono>
#include <deque>
#include <functional>
#include <mutex>
#include <string_view>
#include <vector>

namespace charge_outbox::db {

namespace asio = boost::asio;

// A job waiting for a connection. Whoever hands it one (or the right to open one) does so under the mutex
// and cancels its timer there; the waiter starts its wait and takes the mutex again before its timer goes,
// so the cancel never races the wait's start nor touches a destroyed timer.
struct PgPool::Waiter {
  asio::steady_timer* timer;
  std::unique_ptr<PgConnection> connection;
  bool handed = false;  // with `connection`, or with the right to open one (counted in `open` already)
};

struct PgPool::Shared {
  std::size_t limit = 0;
  std::chrono::milliseconds call_timeout{0};
  std::string name;  // application_name, for log lines
  std::function<void()> on_replaced;
  std::atomic<std::uint64_t> replaced{0};
  CallDeadlines deadlines;
  std::mutex mutex;
  std::vector<std::unique_ptr<PgConnection>> idle;
  std::size_t open = 0;  // idle, lent, and being opened
  std::deque<Waiter*> waiters;
  bool closed = false;

  // `connection` is closed because its server went away or turned read-only: one line, one count. The
  // line names the pool and the server, never the URL (it may hold a password).
  void Replaced(const PgConnection& connection, std::string_view why) {
    spdlog::warn("database connection of pool {} to {} closed and replaced: {}", name.empty() ? "-" : name,
                 connection.Endpoint(), why);
    ++replaced;
    if (on_replaced) on_replaced();
  }

  // A connection came back (nullptr: one was closed, or failed to open): to the first waiter, else idle.
  // Called with the mutex held.
  void GiveBack(std::unique_ptr<PgConnection> connection) {
    if (!waiters.empty()) {
      Waiter* next = waiters.front();
      waiters.pop_front();
      next->connection = std::move(connection);
      next->handed = true;
      next->timer->cancel();
      return;
    }
    if (connection && !closed) {
      idle.push_back(std::move(connection));
    } else {
      --open;
    }
  }
};

PgPool::Lease::Lease(std::shared_ptr<Shared> shared, std::unique_ptr<PgConnection> connection,
                     CallDeadlines::Clock::time_point deadline)
    : shared_(std::move(shared)), connection_(std::move(connection)) {
  connection_->ForgetSent();
  armed_.emplace(shared_->deadlines.Arm(connection_->socket(), deadline));
}

JobFailure PgPool::Lease::Classify(const std::exception_ptr& failure) const {
  return ClassifyJobFailure(failure, connection_->sent(), armed_ && armed_->expired(), connection_->ServerReadOnly());
}

PgPool::Lease::~Lease() {
  if (!shared_) return;  // moved from
  const bool expired = armed_ && armed_->expired();
  armed_.reset();
  if (expired) {
    spdlog::warn("a database call had no answer within database.call_timeout ({}ms): its connection was dropped",
                 shared_->call_timeout.count());
  } else if (connection_->lost()) {
    shared_->Replaced(*connection_, connection_->LostReason());
  } else if (retired_) {
    shared_->Replaced(*connection_, "the server is read-only (a standby, after a failover?)");
  }
  // A connection that lost its server, ran past its deadline, was left mid-statement or inside a
  // transaction, or whose server turned out read-only, is closed.
  if (expired || retired_ || !connection_->reusable()) connection_.reset();
  std::lock_guard lock(shared_->mutex);
  if (shared_->closed) connection_.reset();
  shared_->GiveBack(std::move(connection_));
}

PgPool::PgPool(std::string database_url, DatabaseOptions options)
    : url_(ConnectionString(database_url, options.application_name, options.connection)),
      options_(std::move(options)),
      shared_(std::make_shared<Shared>()),
      opener_(std::max<std::size_t>(1, options_.connections)) {
  shared_->limit = std::max<std::size_t>(1, options_.connections);
  shared_->call_timeout = options_.connection.call_timeout;
  shared_->name = options_.application_name;
  shared_->on_replaced = options_.on_connection_replaced;
}

PgPool::~PgPool() { Close(); }

void PgPool::Close() {
  {
    std::lock_guard lock(shared_->mutex);
    if (!shared_->closed) {
      shared_->closed = true;
      shared_->open -= shared_->idle.size();
      shared_->idle.clear();
      for (Waiter* waiter : shared_->waiters) waiter->timer->cancel();  // not handed: refused
      shared_->waiters.clear();
    }
  }
  opener_.join();
}

std::size_t PgPool::queued() const {
  std::lock_guard lock(shared_->mutex);
  return shared_->waiters.size();
}

std::uint64_t PgPool::replaced() const { return shared_->replaced.load(); }

void PgPool::Rethrow(const std::exception_ptr& failure, JobFailure what) {
  if (what == JobFailure::kReadOnlyServer) {
    // Not a refused statement but an unavailable primary: the caller's answer is "try again".
    throw pqxx::broken_connection(
        "the database server is read-only (a standby): nothing was written; a DATABASE_URL listing every host "
        "with target_session_attrs=read-write finds the primary after a failover");
  }
  std::rethrow_exception(failure);
}

namespace {

// A coroutine function, not a lambda with an init-capture: GCC 12 destroys such a lambda's captures twice
// when the coroutine is spawned from it.
asio::awaitable<std::unique_ptr<PgConnection>> OpenConnection(std::string url) { co_return PgConnection::Open(url); }

}  // namespace

asio::awaitable<std::unique_ptr<PgConnection>> PgPool::Open() {
  co_return co_await asio::co_spawn(opener_, OpenConnection(url_), asio::use_awaitable);
}

asio::awaitable<PgPool::Lease> PgPool::Acquire(CallDeadlines::Clock::time_point deadline) {
  const auto executor = co_await asio::this_coro::executor;
  auto& shared = *shared_;
  std::unique_ptr<PgConnection> connection;
  std::optional<asio::steady_timer> timer;
  Waiter waiter{nullptr};
  {
    std::lock_guard lock(shared.mutex);
    if (shared.closed) throw PoolOverloaded("database pool is closed");
    if (!shared.idle.empty()) {
      connection = std::move(shared.idle.back());
      shared.idle.pop_back();
    } else if (shared.open < shared.limit) {
      ++shared.open;
    } else if (shared.waiters.size() >= options_.max_queued) {
      throw PoolOverloaded();
    } else {
      waiter.timer = &timer.emplace(executor, deadline);
      shared.waiters.push_back(&waiter);
    }
  }
  if (timer) {
    // Also when this coroutine is destroyed while it waits (its executor shut down): the waiter leaves the
    // queue, and what it was handed goes to the next one.
    struct Unlist {
      Shared& shared;
      Waiter& waiter;
      ~Unlist() {
        std::lock_guard lock(shared.mutex);
        if (!waiter.handed) {
          std::erase(shared.waiters, &waiter);
        } else if (waiter.timer != nullptr) {
          shared.GiveBack(std::move(waiter.connection));
        }
      }
    } unlist{shared, waiter};
    // The wait starts under the mutex, so a hand-off (or Close) that came before it is seen, and every
    // call on the timer, from this thread or the one handing over, is serialised.
    auto token = asio::as_tuple(asio::use_awaitable);
    co_await asio::async_initiate<decltype(token), void(boost::system::error_code)>(
        [&](auto handler) {
          std::lock_guard lock(shared.mutex);
          timer->async_wait(std::move(handler));
          if (waiter.handed || shared.closed) timer->cancel();
        },
        token);
    std::lock_guard lock(shared.mutex);
    if (!waiter.handed) {
      if (shared.closed) throw PoolOverloaded("database pool is closed");
      // Its caller's deadline passed while every connection was busy (or hung): nothing was sent.
      throw PoolOverloaded("no database connection free within database.call_timeout");
    }
    if (CallDeadlines::Clock::now() >= deadline) {
      // Handed over as its deadline passed: the connection goes on to the next job, still good.
      throw PoolOverloaded("no database connection free within database.call_timeout");
    }
    connection = std::move(waiter.connection);
    waiter.timer = nullptr;  // taken
  }
  if (connection && !connection->Alive()) {
    // Its server went away while it idled: nothing is sent on it, and its place goes to a fresh one.
    shared.Replaced(*connection, connection->LostReason());
    connection.reset();
  }
  if (!connection) {
    try {
      connection = co_await Open();  // bounded by connect_timeout
    } catch (...) {
      std::lock_guard lock(shared.mutex);
      shared.GiveBack(nullptr);  // the next waiter tries for itself, and learns why at once
      throw;
    }
  }
  co_return Lease(shared_, std::move(connection), deadline);
}

}  // namespace charge_outbox::db
